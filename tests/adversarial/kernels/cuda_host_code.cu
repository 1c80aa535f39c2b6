/* kernelcrew
flags: [-O3]
launch:
  - kernel: tiny_sss
    grid: [rows]
    block: [1]
    args: [x, out, a, b, rows, cols]
*/
// ATTACK: a CUDA file with host code: a host function that allocates, copies and
// launches on its own stream and times itself, the way a kernel could fake its timing
// or skip the harness. Defense: CUDA kernel files must be device code only; the
// static check names the line and the rule.
#include <cuda_fp16.h>

extern "C" __global__ void tiny_sss(const float* x, float* out, float a, float b,
                                    long long rows, long long cols) {
    long long r = blockIdx.x;
    float acc = 0.0f;
    for (long long c = 0; c < cols; ++c) acc += a * x[r * cols + c] + b;
    out[r] = acc;
}

extern "C" void launch_my_way(const float* x, float* out, long long rows, long long cols) {
    float* scratch;
    cudaMalloc(&scratch, rows * sizeof(float));
    tiny_sss<<<rows, 1>>>(x, scratch, 1.5f, 0.25f, rows, cols);
    cudaMemcpy(out, scratch, rows * sizeof(float), cudaMemcpyDeviceToDevice);
}
