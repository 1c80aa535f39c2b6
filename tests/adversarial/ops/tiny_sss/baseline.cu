/* kernelcrew
flags: [-O3]
knobs: {BLOCK: 128}
launch:
  - kernel: tiny_sss
    grid: [rows]
    block: [BLOCK]
    args: [x, out, a, b, rows, cols]
*/
// Naive baseline: one block per row, a shared-memory tree reduction.
extern "C" __global__ void tiny_sss(const float* __restrict__ x, float* __restrict__ out,
                                    float a, float b, long long rows, long long cols) {
    __shared__ float part[BLOCK];
    long long r = blockIdx.x;
    float acc = 0.0f;
    for (long long c = threadIdx.x; c < cols; c += BLOCK) {
        acc += a * x[r * cols + c] + b;
    }
    part[threadIdx.x] = acc;
    __syncthreads();
    for (int s = BLOCK / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) part[threadIdx.x] += part[threadIdx.x + s];
        __syncthreads();
    }
    if (threadIdx.x == 0) out[r] = part[0];
}
