/* kernelcrew
entry: conv1d_causal
flags: [-O3, -march=native, -fopenmp]
*/
// Hand-optimized CPU version: loop order (b, c, t) so each channel's time series is read
// at unit stride; the first K-1 outputs (where the filter reaches before t = 0) apart,
// the taps run without checks and vectorize along t; (b, c) rows split across threads.
#include <cstdint>

namespace {

inline void channel(const float* __restrict__ x, const float* __restrict__ w, float bias,
                    float* __restrict__ o, int64_t L, int64_t K) {
    const int64_t head = K - 1 < L ? K - 1 : L;
    for (int64_t t = 0; t < head; ++t) {
        float acc = bias;
        for (int64_t k = K - 1 - t; k < K; ++k) acc += w[k] * x[t - (K - 1) + k];
        o[t] = acc;
    }
    if (K == 4) {  // the common filter width, taps unrolled
        const float w0 = w[0], w1 = w[1], w2 = w[2], w3 = w[3];
#pragma omp simd
        for (int64_t t = head; t < L; ++t)
            o[t] = (((bias + w0 * x[t - 3]) + w1 * x[t - 2]) + w2 * x[t - 1]) + w3 * x[t];
        return;
    }
#pragma omp simd
    for (int64_t t = head; t < L; ++t) o[t] = bias;
    for (int64_t k = 0; k < K; ++k) {
        const float wk = w[k];
        const int64_t off = k - (K - 1);
#pragma omp simd
        for (int64_t t = head; t < L; ++t) o[t] += wk * x[t + off];
    }
}

}  // namespace

extern "C" void conv1d_causal(const float* __restrict__ x, const float* __restrict__ w,
                              const float* __restrict__ bias, float* __restrict__ out,
                              int64_t B, int64_t C, int64_t L, int64_t K) {
    if (B * C * L * K < (int64_t)1 << 23) {  // under a few ms of work: stay on this thread
        for (int64_t r = 0; r < B * C; ++r)
            channel(x + r * L, w + (r % C) * K, bias[r % C], out + r * L, L, K);
        return;
    }
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < B * C; ++r)
        channel(x + r * L, w + (r % C) * K, bias[r % C], out + r * L, L, K);
}
