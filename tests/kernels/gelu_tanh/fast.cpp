/* kernelcrew
entry: gelu_tanh
flags: [-O3, -march=native, -fopenmp]
*/
// Hand-optimized CPU version: 0.5 x (1 + tanh(u)) rewritten as x / (1 + exp(-2u))
// (the same function, better conditioned for large negative x), exp as a branch-free
// polynomial so the loop vectorizes, OpenMP threads for large arrays.
#include <cstdint>
#include <cstring>

namespace {

// exp(x) for x in [-87, 88] (clamped): Cody-Waite reduction + degree-6 polynomial, ~1 ulp,
// branch-free so it vectorizes with AVX2 as well as AVX-512.
inline float kc_expf(float x) {
    x = x < -87.0f ? -87.0f : (x > 88.0f ? 88.0f : x);
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

inline void gelu_range(const float* __restrict__ x, float* __restrict__ y, int64_t lo,
                       int64_t hi) {
    const float s2 = -2.0f * 0.7978845608028654f;
#pragma omp simd
    for (int64_t i = lo; i < hi; ++i) {
        const float v = x[i];
        const float z = s2 * (v + 0.044715f * v * v * v);
        y[i] = v / (1.0f + kc_expf(z));
    }
}

}  // namespace

extern "C" void gelu_tanh(const float* __restrict__ x, float* __restrict__ y, int64_t n) {
    if (n < (int64_t)1 << 18) {  // under ~1 ms of work: stay on this thread
        gelu_range(x, y, 0, n);
        return;
    }
    const int64_t chunk = 16384;
#pragma omp parallel for schedule(static)
    for (int64_t c = 0; c < (n + chunk - 1) / chunk; ++c) {
        const int64_t lo = c * chunk;
        gelu_range(x, y, lo, lo + chunk < n ? lo + chunk : n);
    }
}
