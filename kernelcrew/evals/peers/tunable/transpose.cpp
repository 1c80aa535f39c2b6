/* kernelcrew
entry: transpose
flags: [-O3, -march=native, -fopenmp]
knobs: {TILE: 8, THREADS: 1}
*/
// knob space: {TILE: [8, 16, 32, 64, 128, 256], THREADS: [1, 2]}
// Tunable transpose for the Kernel Tuner comparison: TILE x TILE tiles (each tile's
// lines stay in L1 while it is read and written), tile rows split over THREADS threads.
#include <cstdint>

#ifndef TILE
#define TILE 8
#endif
#ifndef THREADS
#define THREADS 1
#endif

extern "C" void transpose(const float* __restrict__ x, float* __restrict__ y,
                          int64_t rows, int64_t cols) {
#pragma omp parallel for schedule(static) num_threads(THREADS)
    for (int64_t i0 = 0; i0 < rows; i0 += TILE) {
        const int64_t i1 = i0 + TILE < rows ? i0 + TILE : rows;
        for (int64_t j0 = 0; j0 < cols; j0 += TILE) {
            const int64_t j1 = j0 + TILE < cols ? j0 + TILE : cols;
            for (int64_t j = j0; j < j1; ++j) {
                for (int64_t i = i0; i < i1; ++i) {
                    y[j * rows + i] = x[i * cols + j];
                }
            }
        }
    }
}
