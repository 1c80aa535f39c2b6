/* kernelcrew
entry: colsum
flags: [-O3, -march=native, -fopenmp]
*/
// Hand-optimized CPU version: the matrix is read along its rows, each row added into a
// block of column sums that stays in L1 (vectorized), four rows per pass over the block;
// threads own blocks of columns, or, for narrow matrices, bands of rows whose partial
// sums are added at the end.
#include <cstdint>

namespace {

const int64_t COLS = 1024;

inline void block(const float* __restrict__ x, float* __restrict__ out, int64_t r0,
                  int64_t r1, int64_t cols, int64_t j0, int64_t j1) {
#pragma omp simd
    for (int64_t j = j0; j < j1; ++j) out[j] = 0.0f;
    int64_t i = r0;
    for (; i + 4 <= r1; i += 4) {
        const float* a = x + i * cols;
        const float* b = a + cols;
        const float* c = b + cols;
        const float* d = c + cols;
#pragma omp simd
        for (int64_t j = j0; j < j1; ++j) out[j] = (((out[j] + a[j]) + b[j]) + c[j]) + d[j];
    }
    for (; i < r1; ++i) {
        const float* a = x + i * cols;
#pragma omp simd
        for (int64_t j = j0; j < j1; ++j) out[j] += a[j];
    }
}

}  // namespace

extern "C" void colsum(const float* __restrict__ x, float* __restrict__ out, int64_t rows,
                       int64_t cols) {
    const int64_t nb = (cols + COLS - 1) / COLS;
    if (rows * cols < (int64_t)1 << 20) {  // under ~1 ms of work: stay on this thread
        for (int64_t b = 0; b < nb; ++b)
            block(x, out, 0, rows, cols, b * COLS, (b + 1) * COLS < cols ? (b + 1) * COLS : cols);
        return;
    }
    if (nb >= 2) {
#pragma omp parallel for schedule(static)
        for (int64_t b = 0; b < nb; ++b)
            block(x, out, 0, rows, cols, b * COLS, (b + 1) * COLS < cols ? (b + 1) * COLS : cols);
        return;
    }
    // narrow and tall: two bands of rows, the second band's sums in a small local array
    const int64_t half = rows / 2;
    float part[COLS];
#pragma omp parallel sections
    {
#pragma omp section
        block(x, out, 0, half, cols, 0, cols);
#pragma omp section
        block(x, part, half, rows, cols, 0, cols);
    }
    for (int64_t j = 0; j < cols; ++j) out[j] += part[j];
}
