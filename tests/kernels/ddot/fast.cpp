/* kernelcrew
entry: ddot
flags: [-O3, -march=native, -fopenmp]
*/
// Hand-optimized CPU version: the sum as an `omp simd` reduction (vector accumulators,
// no single add chain), split across OpenMP threads for long vectors.
#include <cstdint>

extern "C" void ddot(const double* __restrict__ x, const double* __restrict__ y,
                     double* __restrict__ r, int64_t n) {
    double s = 0.0;
    if (n < (int64_t)1 << 18) {  // under ~1 ms of work: stay on this thread
#pragma omp simd reduction(+ : s)
        for (int64_t i = 0; i < n; ++i) s += x[i] * y[i];
    } else {
#pragma omp parallel for simd reduction(+ : s) schedule(static)
        for (int64_t i = 0; i < n; ++i) s += x[i] * y[i];
    }
    r[0] = s;
}
