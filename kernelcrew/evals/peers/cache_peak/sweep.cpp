/* kernelcrew
entry: sweep
flags: [-O3, -march=native, -fopenmp]
knobs: {THREADED: 1}
*/
// The read-only bandwidth probe for the roofline: the max of b, c and d (float32; exact,
// so the check against the reference loses nothing to rounding), three streams as the
// triad has (one stream alone reads slower), timed like the triad probe.
// Where a written line is read for ownership first, a kernel that only reads moves each
// counted byte once and the triad's written third twice.
#include <cstdint>

extern "C" void sweep(const float* __restrict__ b, const float* __restrict__ c,
                      const float* __restrict__ d, float* __restrict__ m, int64_t n) {
    float best = -3.4e38f;
#if THREADED
#pragma omp parallel for simd schedule(static) reduction(max : best)
#else
#pragma omp simd reduction(max : best)
#endif
    for (int64_t i = 0; i < n; ++i) {
        float v = b[i] > c[i] ? b[i] : c[i];
        v = v > d[i] ? v : d[i];
        best = v > best ? v : best;
    }
    m[0] = best;
}
