/* kernelcrew
entry: transpose
flags: [-O3, -march=native, -fopenmp]
knobs: {TILE: 32}
*/
// Hand-optimized CPU version: cache blocking. The matrix is cut into TILE x TILE
// tiles; each tile is read and written while its lines stay in L1, so neither
// side walks a whole column. Tiles are split across OpenMP threads. Tiles fewer
// than 8 rows high are copied row by row (the writes are then nearly contiguous),
// and only problems worth more than about 1 ms of single-thread work go
// parallel: below that, waking the OpenMP team (milliseconds on a busy machine)
// can cost more than it saves.
#include <cstdint>

#ifndef TILE
#define TILE 32
#endif

namespace {

inline void tile_copy(const float* __restrict__ x, float* __restrict__ y, int64_t rows,
                      int64_t cols, int64_t i0, int64_t j0) {
    const int64_t i1 = i0 + TILE < rows ? i0 + TILE : rows;
    const int64_t j1 = j0 + TILE < cols ? j0 + TILE : cols;
    if (i1 - i0 < 8) {
        for (int64_t i = i0; i < i1; ++i) {
            const float* __restrict__ xi = x + i * cols;
            for (int64_t j = j0; j < j1; ++j) y[j * rows + i] = xi[j];
        }
        return;
    }
    for (int64_t j = j0; j < j1; ++j) {
        float* __restrict__ yj = y + j * rows;
#pragma omp simd
        for (int64_t i = i0; i < i1; ++i) yj[i] = x[i * cols + j];
    }
}

}  // namespace

extern "C" void transpose(const float* __restrict__ x, float* __restrict__ y,
                          int64_t rows, int64_t cols) {
    const int64_t ti = (rows + TILE - 1) / TILE, tj = (cols + TILE - 1) / TILE;
    if (rows * cols < (int64_t)1 << 21) {  // under ~1 ms of work: stay on this thread
        for (int64_t t = 0; t < ti * tj; ++t)
            tile_copy(x, y, rows, cols, (t / tj) * TILE, (t % tj) * TILE);
        return;
    }
#pragma omp parallel for schedule(static)
    for (int64_t t = 0; t < ti * tj; ++t)
        tile_copy(x, y, rows, cols, (t / tj) * TILE, (t % tj) * TILE);
}
