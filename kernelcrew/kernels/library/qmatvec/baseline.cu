/* kernelcrew
flags: [-O3]
knobs: {BLOCK: 256}
launch:
  - kernel: qmatvec
    grid: ["ceil_div(m, BLOCK)"]
    block: [BLOCK]
    shared_bytes: 0
    args: [W, x, scale, y, m, n]
*/
// Naive CUDA baseline: one thread per row, an int32 dot product walked serially
// (uncoalesced across threads), scaled into float at the end.
extern "C" __global__ void qmatvec(const int* W, const int* x, const float* scale, float* y,
                                   long long m, long long n) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= m) return;
    int sumi = 0;
    for (long long j = 0; j < n; j++) {
        sumi += W[i * n + j] * x[j];
    }
    y[i] = scale[i] * (float)sumi;
}
