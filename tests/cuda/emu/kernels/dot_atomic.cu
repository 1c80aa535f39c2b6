/* kernelcrew
flags: [-O3]
knobs: {BLOCK: 128}
launch:
  - kernel: clear
    grid: [1]
    block: [1]
    args: [r]
  - kernel: dot_atomic
    grid: ["ceil_div(n, BLOCK)"]
    block: [BLOCK]
    args: [x, y, r, n]
*/
// op: ddot. Every product added straight into the result with atomicAdd.
extern "C" __global__ void clear(double* r) { r[0] = 0.0; }

extern "C" __global__ void dot_atomic(const double* x, const double* y, double* out,
                                      long long n) {
    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i < n) {
        double p = x[i] * y[i];
        atomicAdd(&out[0], p);
    }
}
