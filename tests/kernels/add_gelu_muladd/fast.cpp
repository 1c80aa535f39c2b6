/* kernelcrew
entry: add_gelu_muladd
flags: [-O3, -march=native, -fopenmp]
*/
// Hand-optimized CPU version: one fused pass (add, exact GELU, scale/shift),
// OpenMP over rows, and a branch-free float erf that the compiler vectorizes
// under `omp simd` (glibc's scalar erff would block vectorization).
// Only problems worth more than about 1 ms of single-thread work go parallel:
// below that, waking the OpenMP team (milliseconds on a busy machine) can
// cost more than it saves.
#include <cstdint>
#include <cstring>

namespace {

// exp(x) for x <= 0 (clamped at -87): Cody-Waite reduction + degree-6 polynomial,
// about 1 ulp. Branch-free so it vectorizes.
inline float kc_expf(float x) {
    x = x < -87.0f ? -87.0f : x;
    const float t = x * 1.44269504088896341f + 12582912.0f;  // round(x*log2e) in low bits
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

// Exact-form GELU: 0.5 * v * (1 + erf(v / sqrt(2))).
// |z| < 0.921875: erf(z) = z * P(z^2); otherwise 1 - erf(|z|) = exp(Q(|z|)),
// both fitted near-minimax; erf error <= ~1.3e-7 absolute over all floats.
inline float kc_gelu(float v) {
    const float z = v * 0.70710678118654752f;
    const float az = z < 0.0f ? -z : z;
    const float s = z * z;
    float p = 8.370244177058339e-05f;
    p = p * s + -0.0008142744190990925f;
    p = p * s + 0.00520103657618165f;
    p = p * s + -0.026859400793910027f;
    p = p * s + 0.11283695697784424f;
    p = p * s + -0.37612634897232056f;
    p = p * s + 1.128379225730896f;
    const float small = 1.0f + z * p;  // 1 + erf(z), |z| small
    const float u = (az < 4.0f ? az : 4.0f) - 2.5f;
    float q = 1.6024924889279646e-06f;
    q = q * u + -1.3304783351486549e-05f;
    q = q * u + 7.744580216240138e-05f;
    q = q * u + -0.0004201635019853711f;
    q = q * u + 0.002165090525522828f;
    q = q * u + -0.010858495719730854f;
    q = q * u + -0.9438936114311218f;
    q = q * u + -5.352680683135986f;
    q = q * u + -7.806815147399902f;
    const float ec = kc_expf(q < 0.0f ? q : 0.0f);   // erfc(|z|)
    const float large = z < 0.0f ? ec : 2.0f - ec;  // 1 + erf(z) = erfc(-z)
    const float onep = az < 0.921875f ? small : large;
    return 0.5f * v * onep;
}

inline void agm_row(const float* __restrict__ xi, const float* __restrict__ ri,
                    const float* __restrict__ s, const float* __restrict__ t,
                    float* __restrict__ yi, int64_t cols) {
#pragma omp simd
    for (int64_t j = 0; j < cols; ++j) {
        yi[j] = kc_gelu(xi[j] + ri[j]) * s[j] + t[j];
    }
}

}  // namespace

extern "C" void add_gelu_muladd(const float* __restrict__ x, const float* __restrict__ r,
                                const float* __restrict__ s, const float* __restrict__ t,
                                float* __restrict__ y, int64_t rows, int64_t cols) {
    if (rows * cols < (int64_t)1 << 20) {  // under ~1 ms of work: stay on this thread
        for (int64_t i = 0; i < rows; ++i)
            agm_row(x + i * cols, r + i * cols, s, t, y + i * cols, cols);
        return;
    }
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < rows; ++i)
        agm_row(x + i * cols, r + i * cols, s, t, y + i * cols, cols);
}
