/* kernelcrew
flags: [-O3]
launch:
  - kernel: hgemm
    grid: ["ceil_div(n, 16)", "ceil_div(m, 16)"]
    block: [16, 16]
    args: [a, b, c, m, k, n]
*/
// op: hgemm. Half-precision operands converted to float per product, a float sum.
#include <cuda_fp16.h>
extern "C" __global__ void hgemm(const __half* a, const __half* b, float* c, long long M,
                                 long long K, long long N) {
    int row = blockIdx.y * blockDim.y + threadIdx.y;
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= M || col >= N) return;
    float sum = 0.0f;
    for (int i = 0; i < K; ++i) {
        sum += __half2float(a[row * K + i]) * __half2float(b[i * N + col]);
    }
    c[row * N + col] = sum;
}
