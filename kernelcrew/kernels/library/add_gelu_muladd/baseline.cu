/* kernelcrew
flags: [-O3]
knobs: {BLOCK: 256}
temps:
  h1: {dtype: float32, shape: [rows, cols]}
  h2: {dtype: float32, shape: [rows, cols]}
launch:
  - kernel: add_kernel
    grid: ["ceil_div(rows*cols, BLOCK)"]
    block: [BLOCK]
    shared_bytes: 0
    args: [x, r, h1, rows, cols]
  - kernel: gelu_kernel
    grid: ["ceil_div(rows*cols, BLOCK)"]
    block: [BLOCK]
    shared_bytes: 0
    args: [h1, h2, rows, cols]
  - kernel: muladd_kernel
    grid: ["ceil_div(rows*cols, BLOCK)"]
    block: [BLOCK]
    shared_bytes: 0
    args: [h2, s, t, y, rows, cols]
*/
// Naive CUDA baseline: three separate kernels, one element per thread, with
// the intermediates h1 = x + r and h2 = gelu(h1) round-tripping through memory.
extern "C" __global__ void add_kernel(const float* x, const float* r, float* h1,
                                      long long rows, long long cols) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= rows * cols) return;
    h1[i] = x[i] + r[i];
}

extern "C" __global__ void gelu_kernel(const float* h1, float* h2, long long rows,
                                       long long cols) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= rows * cols) return;
    float v = h1[i];
    h2[i] = 0.5f * v * (1.0f + erff(v * 0.70710678118654752f));
}

extern "C" __global__ void muladd_kernel(const float* h2, const float* s, const float* t,
                                         float* y, long long rows, long long cols) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= rows * cols) return;
    long long j = i % cols;
    y[i] = h2[i] * s[j] + t[j];
}
