/* kernelcrew
flags: [-O3]
knobs: {BLOCK: 256}
launch:
  - kernel: scale_shift_sum
    grid: ["ceil_div(rows, BLOCK)"]
    block: [BLOCK]
    shared_bytes: 0
    args: [x, out, a, b, rows, cols]
*/
// Naive CUDA baseline: one thread per row walks its whole row serially
// (neighbouring threads read addresses `cols` floats apart: uncoalesced).
extern "C" __global__ void scale_shift_sum(const float* x, float* out, float a, float b,
                                           long long rows, long long cols) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= rows) return;
    float acc = 0.0f;
    for (long long j = 0; j < cols; ++j) {
        acc += a * x[i * cols + j] + b;
    }
    out[i] = acc;
}
