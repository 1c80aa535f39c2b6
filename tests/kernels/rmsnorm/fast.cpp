/* kernelcrew
entry: rmsnorm
flags: [-O3, -march=native, -fopenmp]
*/
// Hand-optimized CPU version: rows split across OpenMP threads, the sum of
// squares as an `omp simd` reduction and a vectorized scaling pass.
// Only problems worth more than about 1 ms of single-thread work go parallel:
// below that, waking the OpenMP team (milliseconds on a busy machine) can
// cost more than it saves.
#include <cmath>
#include <cstdint>

namespace {

inline void rms_row(const float* __restrict__ xr, const float* __restrict__ w,
                    float* __restrict__ yr, float eps, int64_t cols) {
    float ss = 0.0f;
#pragma omp simd reduction(+ : ss)
    for (int64_t j = 0; j < cols; ++j) {
        ss += xr[j] * xr[j];
    }
    const float inv = 1.0f / std::sqrt(ss / (float)cols + eps);
#pragma omp simd
    for (int64_t j = 0; j < cols; ++j) {
        yr[j] = xr[j] * inv * w[j];
    }
}

}  // namespace

extern "C" void rmsnorm(const float* __restrict__ x, const float* __restrict__ w,
                        float* __restrict__ y, float eps, int64_t rows, int64_t cols) {
    if (rows * cols < (int64_t)1 << 22) {  // under ~1 ms of work: stay on this thread
        for (int64_t i = 0; i < rows; ++i) rms_row(x + i * cols, w, y + i * cols, eps, cols);
        return;
    }
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < rows; ++i) rms_row(x + i * cols, w, y + i * cols, eps, cols);
}
