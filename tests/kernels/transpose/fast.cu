/* kernelcrew
flags: [-O3]
knobs: {TILE: 32, BLOCK_ROWS: 8}
launch:
  - kernel: transpose_fast
    grid: ["ceil_div(cols, TILE)", "ceil_div(rows, TILE)"]
    block: [TILE, BLOCK_ROWS]
    shared_bytes: 0
    args: [x, y, rows, cols]
*/
// Hand-optimized CUDA version: classic shared-memory tiled transpose. Each
// TILE x TILE tile is read from x with coalesced row accesses, staged in shared
// memory (one column of padding removes bank conflicts) and written to y with
// coalesced row accesses. Each thread moves TILE/BLOCK_ROWS elements.

extern "C" __global__ void __launch_bounds__(TILE * BLOCK_ROWS)
transpose_fast(const float* __restrict__ x, float* __restrict__ y, long long rows,
               long long cols) {
    __shared__ float tile[TILE][TILE + 1];
    const long long j0 = (long long)blockIdx.x * TILE;  // column block of x
    const long long i0 = (long long)blockIdx.y * TILE;  // row block of x
    const int tx = threadIdx.x, ty = threadIdx.y;
    const long long j = j0 + tx;
#pragma unroll
    for (int d = 0; d < TILE; d += BLOCK_ROWS) {
        const long long i = i0 + ty + d;
        if (i < rows && j < cols) tile[ty + d][tx] = __ldg(x + i * cols + j);
    }
    __syncthreads();
    const long long oi = i0 + tx;  // column of y = row of x
#pragma unroll
    for (int d = 0; d < TILE; d += BLOCK_ROWS) {
        const long long oj = j0 + ty + d;  // row of y = column of x
        if (oj < cols && oi < rows) y[oj * rows + oi] = tile[tx][ty + d];
    }
}
