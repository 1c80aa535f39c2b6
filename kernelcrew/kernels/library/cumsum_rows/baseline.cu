/* kernelcrew
flags: [-O3]
knobs: {BLOCK: 256}
launch:
  - kernel: cumsum_rows
    grid: ["ceil_div(rows, BLOCK)"]
    block: [BLOCK]
    shared_bytes: 0
    args: [x, y, rows, cols]
*/
// Naive CUDA baseline: one thread per row carries the running sum along its row
// (neighbouring threads touch addresses `cols` floats apart: uncoalesced).
extern "C" __global__ void cumsum_rows(const float* x, float* y, long long rows,
                                       long long cols) {
    long long r = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= rows) return;
    float running = 0.0f;
    for (long long c = 0; c < cols; ++c) {
        running += x[r * cols + c];
        y[r * cols + c] = running;
    }
}
