/* kernelcrew
entry: small_matmul
flags: [-O3, -march=native, -fopenmp]
*/
// Hand-optimized CPU version: OpenMP over the batch, loop interchange to i-k-j
// so the innermost loop streams a row of b and a row of c (unit stride,
// vectorized with `omp simd`); each c row stays in L1 while it accumulates.
// Very narrow products (n < 8) use plain dot products.
// Only problems worth more than about 1 ms of single-thread work go parallel:
// below that, waking the OpenMP team (milliseconds on a busy machine) can
// cost more than it saves.
#include <cstdint>

namespace {

inline void matmul_one(const float* __restrict__ ap, const float* __restrict__ bp,
                       float* __restrict__ cp, int64_t m, int64_t k, int64_t n) {
    if (n < 8) {  // too narrow to vectorize along j: plain dot products
        for (int64_t i = 0; i < m; ++i) {
            for (int64_t j = 0; j < n; ++j) {
                float acc = 0.0f;
                for (int64_t q = 0; q < k; ++q) acc += ap[i * k + q] * bp[q * n + j];
                cp[i * n + j] = acc;
            }
        }
        return;
    }
    for (int64_t i = 0; i < m; ++i) {
        float* __restrict__ ci = cp + i * n;
#pragma omp simd
        for (int64_t j = 0; j < n; ++j) ci[j] = 0.0f;
        for (int64_t q = 0; q < k; ++q) {
            const float aiq = ap[i * k + q];
            const float* __restrict__ bq = bp + q * n;
#pragma omp simd
            for (int64_t j = 0; j < n; ++j) ci[j] += aiq * bq[j];
        }
    }
}

}  // namespace

extern "C" void small_matmul(const float* __restrict__ a, const float* __restrict__ b,
                             float* __restrict__ c, int64_t batch, int64_t m, int64_t k,
                             int64_t n) {
    if (batch * m * k * n < (int64_t)1 << 24) {  // under ~1 ms of work: stay on this thread
        for (int64_t p = 0; p < batch; ++p)
            matmul_one(a + p * m * k, b + p * k * n, c + p * m * n, m, k, n);
        return;
    }
#pragma omp parallel for schedule(static)
    for (int64_t p = 0; p < batch; ++p)
        matmul_one(a + p * m * k, b + p * k * n, c + p * m * n, m, k, n);
}
