/* kernelcrew
entry: small_matmul
flags: [-O3, -march=native, -fopenmp]
knobs: {UNROLL: 1, THREADS: 1, CHUNK: 1}
*/
// knob space: {UNROLL: [1, 2, 4, 8], THREADS: [1, 2], CHUNK: [1, 4, 16, 64]}
// Tunable batched small matmul for the Kernel Tuner comparison: i-k-j order, a row of c
// accumulates UNROLL rows of b per pass (unit stride, vectorizable); the batch is split
// over THREADS threads in chunks of CHUNK matrices.
#include <cstdint>

#ifndef UNROLL
#define UNROLL 1
#endif
#ifndef THREADS
#define THREADS 1
#endif
#ifndef CHUNK
#define CHUNK 1
#endif

extern "C" void small_matmul(const float* __restrict__ a, const float* __restrict__ b,
                             float* __restrict__ c, int64_t batch, int64_t m, int64_t k,
                             int64_t n) {
#pragma omp parallel for schedule(static, CHUNK) num_threads(THREADS)
    for (int64_t p = 0; p < batch; ++p) {
        const float* __restrict__ ap = a + p * m * k;
        const float* __restrict__ bp = b + p * k * n;
        float* __restrict__ cp = c + p * m * n;
        for (int64_t i = 0; i < m; ++i) {
            float* __restrict__ ci = cp + i * n;
            for (int64_t j = 0; j < n; ++j) {
                ci[j] = 0.0f;
            }
            int64_t q = 0;
            for (; q + UNROLL <= k; q += UNROLL) {
                for (int64_t j = 0; j < n; ++j) {
                    float s = ci[j];
                    for (int u = 0; u < UNROLL; ++u) {
                        s += ap[i * k + q + u] * bp[(q + u) * n + j];
                    }
                    ci[j] = s;
                }
            }
            for (; q < k; ++q) {
                const float aiq = ap[i * k + q];
                for (int64_t j = 0; j < n; ++j) {
                    ci[j] += aiq * bp[q * n + j];
                }
            }
        }
    }
}
