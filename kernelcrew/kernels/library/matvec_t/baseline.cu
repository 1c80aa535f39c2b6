/* kernelcrew
flags: [-O3]
knobs: {BLOCK: 256}
launch:
  - kernel: matvec_t
    grid: ["ceil_div(n, BLOCK)"]
    block: [BLOCK]
    shared_bytes: 0
    args: [a, x, y, m, n]
*/
// Naive CUDA baseline: one thread per output walks a column of a (coalesced
// across threads) over all m rows; only n threads exist.
extern "C" __global__ void matvec_t(const float* a, const float* x, float* y, long long m,
                                    long long n) {
    long long j = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= n) return;
    float acc = 0.0f;
    for (long long i = 0; i < m; ++i) {
        acc += a[i * n + j] * x[i];
    }
    y[j] = acc;
}
