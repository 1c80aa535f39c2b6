/* kernelcrew
flags: [-O3]
knobs: {BLOCK: 256}
launch:
  - kernel: small_matmul
    grid: ["ceil_div(batch*m*n, BLOCK)"]
    block: [BLOCK]
    shared_bytes: 0
    args: [a, b, c, batch, m, k, n]
*/
// Naive CUDA baseline: one thread per output element c[p, i, j], reading a row
// of a[p] and a column of b[p] straight from global memory (no reuse, no tiling).
extern "C" __global__ void small_matmul(const float* a, const float* b, float* c,
                                        long long batch, long long m, long long k,
                                        long long n) {
    long long idx = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= batch * m * n) return;
    long long j = idx % n;
    long long i = (idx / n) % m;
    long long p = idx / (m * n);
    const float* ap = a + p * m * k;
    const float* bp = b + p * k * n;
    float acc = 0.0f;
    for (long long q = 0; q < k; ++q) {
        acc += ap[i * k + q] * bp[q * n + j];
    }
    c[idx] = acc;
}
