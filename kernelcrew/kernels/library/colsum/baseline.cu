/* kernelcrew
flags: [-O3]
knobs: {BLOCK: 256}
launch:
  - kernel: colsum
    grid: ["ceil_div(cols, BLOCK)"]
    block: [BLOCK]
    shared_bytes: 0
    args: [x, out, rows, cols]
*/
// Naive CUDA baseline: one thread per column walks the whole column. Reads are
// coalesced across threads, but only `cols` threads exist: a few thousand on a
// GPU that keeps over a hundred thousand in flight.
extern "C" __global__ void colsum(const float* x, float* out, long long rows, long long cols) {
    long long j = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= cols) return;
    float total = 0.0f;
    for (long long i = 0; i < rows; ++i) {
        total += x[i * cols + j];
    }
    out[j] = total;
}
