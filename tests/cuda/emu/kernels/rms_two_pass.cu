/* kernelcrew
flags: [-O3]
knobs: {BLOCK: 256}
temps:
  inv: {dtype: float32, shape: [rows]}
launch:
  - kernel: row_scale
    grid: ["ceil_div(rows, BLOCK)"]
    block: [BLOCK]
    args: [x, inv, eps, rows, cols]
  - kernel: apply_scale
    grid: ["ceil_div(rows*cols, BLOCK)"]
    block: [BLOCK]
    args: [x, w, inv, y, rows, cols]
*/
// op: rmsnorm. A kernel per pass: the row's scale into a temp, then every element
// scaled by it.
extern "C" __global__ void row_scale(const float* x, float* inv, float eps, long long R,
                                     long long C) {
    long long r = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= R) return;
    float ss = 0.0f;
    for (long long j = 0; j < C; ++j) ss += x[r * C + j] * x[r * C + j];
    inv[r] = 1.0f / sqrtf(ss / (float)C + eps);
}

extern "C" __global__ void apply_scale(const float* x, const float* w, const float* inv,
                                       float* y, long long R, long long C) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= R * C) return;
    long long row = i / C;
    y[i] = x[i] * inv[row] * w[i % C];
}
