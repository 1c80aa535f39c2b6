/* kernelcrew
flags: [-O3]
knobs: {BLOCK: 256}
launch:
  - kernel: haxpb
    grid: ["ceil_div(n, BLOCK)"]
    block: [BLOCK]
    args: [x, y, n]
*/
// op: haxpb. Half-precision elements, one per thread, computed in float.
#include <cuda_fp16.h>
extern "C" __global__ void haxpb(const __half* __restrict__ x, __half* __restrict__ y,
                                 long long n) {
    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i >= n) return;
    y[i] = __float2half(2.0f * __half2float(x[i]) + 1.0f);
}
