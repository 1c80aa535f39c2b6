/* kernelcrew
entry: softmax_rows
flags: [-O3, -march=native, -fopenmp]
*/
// Hand-optimized CPU version: rows split across OpenMP threads; per row a
// vectorized max reduction, then one fused pass computing exp (branch-free,
// vectorizable expf, ~1 ulp) with a simd sum reduction, then a multiply by 1/sum.
// Only problems worth more than about 1 ms of single-thread work go parallel:
// below that, waking the OpenMP team (milliseconds on a busy machine) can
// cost more than it saves.
#include <cstdint>
#include <cstring>

namespace {

// exp(x) for x <= 0 (clamped at -87): Cody-Waite reduction + degree-6 polynomial.
inline float kc_expf(float x) {
    x = x < -87.0f ? -87.0f : x;
    const float t = x * 1.44269504088896341f + 12582912.0f;
    const float k = t - 12582912.0f;
    int32_t ki;
    std::memcpy(&ki, &t, sizeof ki);
    ki -= 0x4B400000;
    float r = x - k * 0.693359375f;
    r = r - k * -2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    const float y = p * r * r + r + 1.0f;
    const int32_t bits = (ki + 127) << 23;
    float scale;
    std::memcpy(&scale, &bits, sizeof scale);
    return y * scale;
}

inline void softmax_row(const float* __restrict__ xr, float* __restrict__ yr, int64_t cols) {
    float mx = xr[0];
#pragma omp simd reduction(max : mx)
    for (int64_t j = 0; j < cols; ++j) {
        mx = xr[j] > mx ? xr[j] : mx;
    }
    float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
    for (int64_t j = 0; j < cols; ++j) {
        const float e = kc_expf(xr[j] - mx);
        yr[j] = e;
        sum += e;
    }
    const float inv = 1.0f / sum;
#pragma omp simd
    for (int64_t j = 0; j < cols; ++j) {
        yr[j] *= inv;
    }
}

}  // namespace

extern "C" void softmax_rows(const float* __restrict__ x, float* __restrict__ y,
                             int64_t rows, int64_t cols) {
    if (rows * cols < (int64_t)1 << 21) {  // under ~1 ms of work: stay on this thread
        for (int64_t i = 0; i < rows; ++i) softmax_row(x + i * cols, y + i * cols, cols);
        return;
    }
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < rows; ++i) softmax_row(x + i * cols, y + i * cols, cols);
}
