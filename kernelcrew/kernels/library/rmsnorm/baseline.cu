/* kernelcrew
flags: [-O3]
knobs: {BLOCK: 256}
launch:
  - kernel: rmsnorm
    grid: ["ceil_div(rows, BLOCK)"]
    block: [BLOCK]
    shared_bytes: 0
    args: [x, w, y, eps, rows, cols]
*/
// Naive CUDA baseline: one thread per row; a serial sum of squares, then a
// serial scaling pass. Uncoalesced across threads.
extern "C" __global__ void rmsnorm(const float* x, const float* w, float* y, float eps,
                                   long long rows, long long cols) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= rows) return;
    const float* xr = x + i * cols;
    float* yr = y + i * cols;
    float ss = 0.0f;
    for (long long j = 0; j < cols; ++j) {
        ss += xr[j] * xr[j];
    }
    float inv = 1.0f / sqrtf(ss / (float)cols + eps);
    for (long long j = 0; j < cols; ++j) {
        yr[j] = xr[j] * inv * w[j];
    }
}
