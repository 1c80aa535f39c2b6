/* kernelcrew
entry: attention
flags: [-O3, -march=native, -fopenmp]
*/
// Hand-optimized CPU version: per query, the scores against all keys computed once into
// a scratch row (each dot product an `omp simd` reduction), the softmax over that row
// with a branch-free vectorized exp, then the weighted values accumulated along D.
// (batch entry, query) pairs split across OpenMP threads.
#include <cstdint>
#include <cstdlib>
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

inline void query(const float* __restrict__ qt, const float* __restrict__ kb,
                  const float* __restrict__ vb, float* __restrict__ ot, float* __restrict__ sc,
                  float scale, int64_t T, int64_t D) {
    float mx = -3.0e38f;
    for (int64_t s = 0; s < T; ++s) {
        const float* ks = kb + s * D;
        float d = 0.0f;
#pragma omp simd reduction(+ : d)
        for (int64_t i = 0; i < D; ++i) d += qt[i] * ks[i];
        d *= scale;
        sc[s] = d;
        mx = d > mx ? d : mx;
    }
    float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
    for (int64_t s = 0; s < T; ++s) {
        const float e = kc_expf(sc[s] - mx);
        sc[s] = e;
        sum += e;
    }
    for (int64_t i = 0; i < D; ++i) ot[i] = 0.0f;
    for (int64_t s = 0; s < T; ++s) {
        const float p = sc[s];
        const float* vs = vb + s * D;
#pragma omp simd
        for (int64_t i = 0; i < D; ++i) ot[i] += p * vs[i];
    }
    const float inv = 1.0f / sum;
#pragma omp simd
    for (int64_t i = 0; i < D; ++i) ot[i] *= inv;
}

}  // namespace

extern "C" void attention(const float* __restrict__ q, const float* __restrict__ k,
                          const float* __restrict__ v, float* __restrict__ out, float scale,
                          int64_t B, int64_t T, int64_t D) {
    const bool serial = B * T * T * D < (int64_t)1 << 19;  // under ~1 ms of work
#pragma omp parallel if (!serial)
    {
        float* sc = (float*)std::malloc(sizeof(float) * (size_t)T);
#pragma omp for schedule(static)
        for (int64_t bt = 0; bt < B * T; ++bt) {
            const int64_t b = bt / T;
            if (sc) {
                query(q + bt * D, k + b * T * D, v + b * T * D, out + bt * D, sc, scale, T, D);
            } else {  // no scratch row: leave NaN so the failure is seen, never wrong numbers
                for (int64_t i = 0; i < D; ++i) out[bt * D + i] = __builtin_nanf("");
            }
        }
        std::free(sc);
    }
}
