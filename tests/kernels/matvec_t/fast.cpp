/* kernelcrew
entry: matvec_t
flags: [-O3, -march=native, -fopenmp]
*/
// Hand-optimized CPU version: y = A^T x as a sum of scaled rows (y += x[i] * a[i, :]),
// so a is read along its rows; each thread owns a block of columns of y, which stays in
// L1 while four rows at a time are added into it (vectorized along the row).
#include <cstdint>

namespace {

const int64_t COLS = 1024;  // columns per block: 4 KB of y

inline void block(const float* __restrict__ a, const float* __restrict__ x,
                  float* __restrict__ y, int64_t m, int64_t n, int64_t j0, int64_t j1) {
#pragma omp simd
    for (int64_t j = j0; j < j1; ++j) y[j] = 0.0f;
    int64_t i = 0;
    for (; i + 4 <= m; i += 4) {
        const float x0 = x[i], x1 = x[i + 1], x2 = x[i + 2], x3 = x[i + 3];
        const float* r0 = a + i * n;
        const float* r1 = r0 + n;
        const float* r2 = r1 + n;
        const float* r3 = r2 + n;
#pragma omp simd
        for (int64_t j = j0; j < j1; ++j)
            y[j] = (((y[j] + x0 * r0[j]) + x1 * r1[j]) + x2 * r2[j]) + x3 * r3[j];
    }
    for (; i < m; ++i) {
        const float xi = x[i];
        const float* r = a + i * n;
#pragma omp simd
        for (int64_t j = j0; j < j1; ++j) y[j] += xi * r[j];
    }
}

}  // namespace

extern "C" void matvec_t(const float* __restrict__ a, const float* __restrict__ x,
                         float* __restrict__ y, int64_t m, int64_t n) {
    const int64_t nb = (n + COLS - 1) / COLS;
    if (m * n < (int64_t)1 << 20 || nb < 2) {  // small, or too narrow to split: one thread
        for (int64_t b = 0; b < nb; ++b)
            block(a, x, y, m, n, b * COLS, (b + 1) * COLS < n ? (b + 1) * COLS : n);
        return;
    }
#pragma omp parallel for schedule(static)
    for (int64_t b = 0; b < nb; ++b)
        block(a, x, y, m, n, b * COLS, (b + 1) * COLS < n ? (b + 1) * COLS : n);
}
