/* kernelcrew
flags: [-O3]
knobs: {BLOCK: 256}
launch:
  - kernel: histogram_zero
    grid: ["ceil_div(bins, BLOCK)"]
    block: [BLOCK]
    shared_bytes: 0
    args: [counts, bins]
  - kernel: histogram
    grid: ["ceil_div(n, BLOCK)"]
    block: [BLOCK]
    shared_bytes: 0
    args: [values, counts, n, bins]
*/
// Naive CUDA baseline, the textbook histogram: clear the counters, then one
// global atomicAdd per value (values that fall in the same bin serialize).
extern "C" __global__ void histogram_zero(int* counts, long long bins) {
    long long b = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (b < bins) counts[b] = 0;
}

extern "C" __global__ void histogram(const int* values, int* counts, long long n,
                                     long long bins) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    atomicAdd(&counts[values[i]], 1);
}
