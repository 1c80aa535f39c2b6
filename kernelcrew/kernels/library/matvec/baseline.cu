/* kernelcrew
flags: [-O3]
knobs: {BLOCK: 256}
launch:
  - kernel: matvec
    grid: ["ceil_div(m, BLOCK)"]
    block: [BLOCK]
    shared_bytes: 0
    args: [A, x, y, m, n]
*/
// Naive CUDA baseline: one thread per row of A computes its dot product serially
// (neighbouring threads read rows n floats apart: uncoalesced).
extern "C" __global__ void matvec(const float* A, const float* x, float* y, long long m,
                                  long long n) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= m) return;
    float sum = 0.0f;
    for (long long j = 0; j < n; j++) {
        sum += A[i * n + j] * x[j];
    }
    y[i] = sum;
}
