/* kernelcrew
entry: rmsnorm
flags: [-O3, -march=native, -fopenmp]
knobs: {ACC: 1, THREADS: 1, CHUNK: 1}
*/
// knob space: {ACC: [1, 2, 4, 8, 16], THREADS: [1, 2], CHUNK: [1, 8, 64]}
// Tunable rmsnorm for the Kernel Tuner comparison: the sum of squares uses ACC
// independent partial sums (so it can vectorize); rows are split over THREADS threads in
// chunks of CHUNK rows.
#include <cmath>
#include <cstdint>

#ifndef ACC
#define ACC 1
#endif
#ifndef THREADS
#define THREADS 1
#endif
#ifndef CHUNK
#define CHUNK 1
#endif

extern "C" void rmsnorm(const float* __restrict__ x, const float* __restrict__ w,
                        float* __restrict__ y, float eps, int64_t rows, int64_t cols) {
#pragma omp parallel for schedule(static, CHUNK) num_threads(THREADS)
    for (int64_t i = 0; i < rows; ++i) {
        const float* __restrict__ xr = x + i * cols;
        float* __restrict__ yr = y + i * cols;
        float acc[ACC] = {};
        int64_t j = 0;
        for (; j + ACC <= cols; j += ACC) {
            for (int u = 0; u < ACC; ++u) {
                acc[u] += xr[j + u] * xr[j + u];
            }
        }
        float ss = 0.0f;
        for (int u = 0; u < ACC; ++u) {
            ss += acc[u];
        }
        for (; j < cols; ++j) {
            ss += xr[j] * xr[j];
        }
        const float inv = 1.0f / std::sqrt(ss / (float)cols + eps);
        for (j = 0; j < cols; ++j) {
            yr[j] = xr[j] * inv * w[j];
        }
    }
}
