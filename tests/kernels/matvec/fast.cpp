/* kernelcrew
entry: matvec
flags: [-O3, -march=native, -fopenmp]
*/
// Hand-optimized CPU version: four rows at a time share each load of x, every dot
// product an `omp simd` reduction (vector accumulators break the add chain), rows
// split across OpenMP threads for large matrices.
#include <cstdint>

namespace {

inline void rows4(const float* __restrict__ A, const float* __restrict__ x,
                  float* __restrict__ y, int64_t i, int64_t n) {
    const float* a0 = A + i * n;
    const float* a1 = a0 + n;
    const float* a2 = a1 + n;
    const float* a3 = a2 + n;
    float s0 = 0.0f, s1 = 0.0f, s2 = 0.0f, s3 = 0.0f;
#pragma omp simd reduction(+ : s0, s1, s2, s3)
    for (int64_t j = 0; j < n; ++j) {
        const float xj = x[j];
        s0 += a0[j] * xj;
        s1 += a1[j] * xj;
        s2 += a2[j] * xj;
        s3 += a3[j] * xj;
    }
    y[i] = s0;
    y[i + 1] = s1;
    y[i + 2] = s2;
    y[i + 3] = s3;
}

inline void row1(const float* __restrict__ A, const float* __restrict__ x,
                 float* __restrict__ y, int64_t i, int64_t n) {
    const float* a = A + i * n;
    float s = 0.0f;
#pragma omp simd reduction(+ : s)
    for (int64_t j = 0; j < n; ++j) s += a[j] * x[j];
    y[i] = s;
}

}  // namespace

extern "C" void matvec(const float* __restrict__ A, const float* __restrict__ x,
                       float* __restrict__ y, int64_t m, int64_t n) {
    const int64_t groups = m / 4;
    if (m * n < (int64_t)1 << 20) {  // under ~1 ms of work: stay on this thread
        for (int64_t g = 0; g < groups; ++g) rows4(A, x, y, 4 * g, n);
    } else if (groups >= 2) {
#pragma omp parallel for schedule(static)
        for (int64_t g = 0; g < groups; ++g) rows4(A, x, y, 4 * g, n);
    } else {  // a few very long rows: split each row's dot product across the threads
        for (int64_t i = 0; i < 4 * groups; ++i) {
            const float* a = A + i * n;
            float s = 0.0f;
#pragma omp parallel for simd reduction(+ : s) schedule(static)
            for (int64_t j = 0; j < n; ++j) s += a[j] * x[j];
            y[i] = s;
        }
    }
    for (int64_t i = 4 * groups; i < m; ++i) row1(A, x, y, i, n);
}
