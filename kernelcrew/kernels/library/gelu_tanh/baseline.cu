/* kernelcrew
flags: [-O3]
knobs: {BLOCK: 256}
launch:
  - kernel: gelu_tanh
    grid: ["ceil_div(n, BLOCK)"]
    block: [BLOCK]
    shared_bytes: 0
    args: [x, y, n]
*/
// Naive CUDA baseline: one thread per element, the formula as written (tanhf).
extern "C" __global__ void gelu_tanh(const float* x, float* y, long long n) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float v = x[i];
    float cube = 0.044715f * v * v * v;
    y[i] = 0.5f * v * (1.0f + tanhf(0.7978845608028654f * (v + cube)));
}
