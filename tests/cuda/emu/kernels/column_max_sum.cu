/* kernelcrew
flags: [-O3]
knobs: {BLOCK: 256}
launch:
  - kernel: col_reduce
    grid: ["ceil_div(cols, BLOCK)"]
    block: [BLOCK]
    args: [x, out, rows, cols]
*/
// op: colsum. One thread per column walks down the rows (coalesced across threads,
// but only `cols` threads), through a pointer to its column.
extern "C" __global__ void col_reduce(const float* __restrict__ x, float* __restrict__ out,
                                      long long R, long long C) {
    long long col = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (col >= C) return;
    const float* p = x + col;
    float s = 0.0f;
    for (long long r = 0; r < R; ++r) {
        s += p[r * C];
    }
    out[col] = s;
}
