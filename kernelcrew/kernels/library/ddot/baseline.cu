/* kernelcrew
flags: [-O3]
knobs: {BLOCK: 256}
launch:
  - kernel: ddot_zero
    grid: [1]
    block: [1]
    shared_bytes: 0
    args: [r]
  - kernel: ddot
    grid: ["ceil_div(n, BLOCK)"]
    block: [BLOCK]
    shared_bytes: 0
    args: [x, y, r, n]
*/
// Naive CUDA baseline, the textbook dot product: one product per thread, a
// shared-memory tree per block (BLOCK: a power of two), and one atomicAdd per
// block into the result, which a first launch clears.
extern "C" __global__ void ddot_zero(double* r) { r[0] = 0.0; }

extern "C" __global__ void ddot(const double* x, const double* y, double* r, long long n) {
    __shared__ double cache[BLOCK];
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    cache[threadIdx.x] = i < n ? x[i] * y[i] : 0.0;
    __syncthreads();
    for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) cache[threadIdx.x] += cache[threadIdx.x + s];
        __syncthreads();
    }
    if (threadIdx.x == 0) atomicAdd(r, cache[0]);
}
