/* kernelcrew
flags: [-O3]
knobs: {BLOCK: 256}
launch:
  - kernel: bmm
    grid: ["ceil_div(batch*m*n, BLOCK)"]
    block: [BLOCK]
    args: [a, b, c, batch, m, k, n]
*/
// op: small_matmul. A batched product whose coordinates come out of the flat index in
// two steps (an intermediate quotient), the operands indexed without helper pointers.
extern "C" __global__ void bmm(const float* a, const float* b, float* c, long long batch,
                               long long M, long long K, long long N) {
    long long t = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (t < batch * M * N) {
        long long col = t % N;
        long long q = t / N;
        long long row = q % M;
        long long p = q / M;
        float acc = 0.0f;
        for (long long kk = 0; kk < K; ++kk)
            acc = fmaf(a[(p * M + row) * K + kk], b[(p * K + kk) * N + col], acc);
        c[q * N + col] = acc;
    }
}
