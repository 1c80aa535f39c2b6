/* kernelcrew
entry: stencil5
flags: [-O3, -march=native, -fopenmp]
*/
// Hand-optimized CPU version: row order (unit stride), the interior of each row one
// vectorized loop over three input rows, the border copied per row; rows split across
// OpenMP threads for large grids.
#include <cstdint>

namespace {

inline void row(const float* __restrict__ u, float* __restrict__ v, float c0, float c1,
                int64_t i, int64_t ny, int64_t nx) {
    const float* up = u + i * nx;
    float* vp = v + i * nx;
    if (i == 0 || i == ny - 1 || nx < 3) {
#pragma omp simd
        for (int64_t j = 0; j < nx; ++j) vp[j] = up[j];
        return;
    }
    const float* un = up - nx;
    const float* us = up + nx;
    vp[0] = up[0];
#pragma omp simd
    for (int64_t j = 1; j < nx - 1; ++j)
        vp[j] = c0 * up[j] + c1 * (((un[j] + us[j]) + up[j - 1]) + up[j + 1]);
    vp[nx - 1] = up[nx - 1];
}

}  // namespace

extern "C" void stencil5(const float* __restrict__ u, float* __restrict__ v, float c0,
                         float c1, int64_t ny, int64_t nx) {
    if (ny * nx < (int64_t)1 << 20) {  // under ~1 ms of work: stay on this thread
        for (int64_t i = 0; i < ny; ++i) row(u, v, c0, c1, i, ny, nx);
        return;
    }
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < ny; ++i) row(u, v, c0, c1, i, ny, nx);
}
