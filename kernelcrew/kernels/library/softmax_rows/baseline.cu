/* kernelcrew
flags: [-O3]
knobs: {BLOCK: 256}
launch:
  - kernel: softmax_rows
    grid: ["ceil_div(rows, BLOCK)"]
    block: [BLOCK]
    shared_bytes: 0
    args: [x, y, rows, cols]
*/
// Naive CUDA baseline: one thread per row, three serial passes over the row
// (max; exp and sum, stored in y; divide). Uncoalesced across threads.
extern "C" __global__ void softmax_rows(const float* x, float* y, long long rows,
                                        long long cols) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= rows) return;
    const float* xr = x + i * cols;
    float* yr = y + i * cols;
    float mx = xr[0];
    for (long long j = 1; j < cols; ++j) {
        mx = fmaxf(mx, xr[j]);
    }
    float sum = 0.0f;
    for (long long j = 0; j < cols; ++j) {
        float e = expf(xr[j] - mx);
        yr[j] = e;
        sum += e;
    }
    for (long long j = 0; j < cols; ++j) {
        yr[j] = yr[j] / sum;
    }
}
