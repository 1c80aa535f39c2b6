/* kernelcrew
entry: triad
flags: [-O3, -march=native, -fopenmp]
knobs: {THREADED: 1}
*/
// The bandwidth probe for the roofline: a = b + s * c (float32), timed by the kernels'
// own harness on arrays as large as an operator's case, so it runs in the cache state
// the operator's kernels run in; timed with THREADED=0 and 1, the faster counts.
#include <cstdint>

extern "C" void triad(const float* __restrict__ b, const float* __restrict__ c,
                      float* __restrict__ a, float s, int64_t n) {
#if THREADED
#pragma omp parallel for simd schedule(static)
    for (int64_t i = 0; i < n; ++i) a[i] = b[i] + s * c[i];
#else
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) a[i] = b[i] + s * c[i];
#endif
}
