/* kernelcrew
entry: scale_shift_sum
flags: [-O3, -march=native, -fopenmp]
*/
// Hand-optimized CPU version: rows split across OpenMP threads; the affine map
// is hoisted out of the sum (sum(a*x+b) = a*sum(x) + b*cols), and the plain
// sum is an `omp simd` reduction so it runs at memory bandwidth.
// Only problems worth more than about 1 ms of single-thread work go parallel:
// below that, waking the OpenMP team (milliseconds on a busy machine) can
// cost more than it saves.
#include <cstdint>

namespace {

inline float row_sum(const float* __restrict__ xr, int64_t cols) {
    float acc = 0.0f;
#pragma omp simd reduction(+ : acc)
    for (int64_t j = 0; j < cols; ++j) {
        acc += xr[j];
    }
    return acc;
}

}  // namespace

extern "C" void scale_shift_sum(const float* __restrict__ x, float* __restrict__ out,
                                float a, float b, int64_t rows, int64_t cols) {
    const float shift = b * (float)cols;
    if (rows * cols < (int64_t)1 << 22) {  // under ~1 ms of work: stay on this thread
        for (int64_t i = 0; i < rows; ++i) out[i] = a * row_sum(x + i * cols, cols) + shift;
        return;
    }
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < rows; ++i) out[i] = a * row_sum(x + i * cols, cols) + shift;
}
