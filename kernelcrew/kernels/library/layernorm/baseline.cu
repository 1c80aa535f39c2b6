/* kernelcrew
flags: [-O3]
knobs: {BLOCK: 256}
launch:
  - kernel: layernorm
    grid: ["ceil_div(B*T, BLOCK)"]
    block: [BLOCK]
    shared_bytes: 0
    args: [inp, weight, bias, out, mean, rstd, B, T, C]
*/
// Naive CUDA baseline: one thread per row does the CPU's three passes (mean,
// variance, normalize) serially; neighbouring threads read rows C floats apart.
extern "C" __global__ void layernorm(const float* inp, const float* weight, const float* bias,
                                     float* out, float* mean, float* rstd, long long B,
                                     long long T, long long C) {
    long long row = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= B * T) return;
    const float* x = inp + row * C;
    float m = 0.0f;
    for (long long i = 0; i < C; i++) {
        m += x[i];
    }
    m = m / C;
    float v = 0.0f;
    for (long long i = 0; i < C; i++) {
        float xshift = x[i] - m;
        v += xshift * xshift;
    }
    v = v / C;
    float s = 1.0f / sqrtf(v + 1e-5f);
    float* o = out + row * C;
    for (long long i = 0; i < C; i++) {
        o[i] = s * (x[i] - m) * weight[i] + bias[i];
    }
    mean[row] = m;
    rstd[row] = s;
}
