/* kernelcrew
flags: [-O3]
knobs: {BLOCK: 256}
launch:
  - kernel: transpose
    grid: ["ceil_div(rows*cols, BLOCK)"]
    block: [BLOCK]
    shared_bytes: 0
    args: [x, y, rows, cols]
*/
// Naive CUDA baseline: one thread per element in x's order; reads of x are
// coalesced, writes to y are strided by `rows` (uncoalesced).
extern "C" __global__ void transpose(const float* x, float* y, long long rows,
                                     long long cols) {
    long long idx = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= rows * cols) return;
    long long i = idx / cols;
    long long j = idx % cols;
    y[j * rows + i] = x[idx];
}
