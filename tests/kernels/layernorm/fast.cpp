/* kernelcrew
entry: layernorm
flags: [-O3, -march=native, -fopenmp]
*/
// Hand-optimized CPU version: rows split across OpenMP threads; the mean and the
// variance as `omp simd` reductions (two passes over a row that stays in cache), one
// vectorized normalize pass.
#include <cmath>
#include <cstdint>

namespace {

inline void ln_row(const float* __restrict__ x, const float* __restrict__ w,
                   const float* __restrict__ b, float* __restrict__ o, float* mean,
                   float* rstd, int64_t C) {
    float s = 0.0f;
#pragma omp simd reduction(+ : s)
    for (int64_t i = 0; i < C; ++i) s += x[i];
    const float m = s / (float)C;
    float v = 0.0f;
#pragma omp simd reduction(+ : v)
    for (int64_t i = 0; i < C; ++i) {
        const float d = x[i] - m;
        v += d * d;
    }
    const float r = 1.0f / std::sqrt(v / (float)C + 1e-5f);
#pragma omp simd
    for (int64_t i = 0; i < C; ++i) o[i] = (x[i] - m) * r * w[i] + b[i];
    *mean = m;
    *rstd = r;
}

}  // namespace

extern "C" void layernorm(const float* __restrict__ inp, const float* __restrict__ weight,
                          const float* __restrict__ bias, float* __restrict__ out,
                          float* __restrict__ mean, float* __restrict__ rstd, int64_t B,
                          int64_t T, int64_t C) {
    const int64_t rows = B * T;
    if (rows * C < (int64_t)1 << 20) {  // under ~1 ms of work: stay on this thread
        for (int64_t r = 0; r < rows; ++r)
            ln_row(inp + r * C, weight, bias, out + r * C, mean + r, rstd + r, C);
        return;
    }
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; ++r)
        ln_row(inp + r * C, weight, bias, out + r * C, mean + r, rstd + r, C);
}
