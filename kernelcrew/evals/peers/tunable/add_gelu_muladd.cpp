/* kernelcrew
entry: add_gelu_muladd
flags: [-O3, -march=native, -fopenmp]
knobs: {THREADS: 1, CHUNK: 1, CB: 256}
*/
// knob space: {THREADS: [1, 2], CHUNK: [1, 4, 16, 64], CB: [256, 1024, 4096]}
// Tunable fused add + exact GELU + scale/shift for the Kernel Tuner comparison: one pass
// over the tensor; rows are split over THREADS threads in chunks of CHUNK rows; each row is walked
// in blocks of CB columns (the s and t blocks stay in L1).
#include <cmath>
#include <cstdint>

#ifndef THREADS
#define THREADS 1
#endif
#ifndef CHUNK
#define CHUNK 1
#endif
#ifndef CB
#define CB 256
#endif

extern "C" void add_gelu_muladd(const float* __restrict__ x, const float* __restrict__ r,
                                const float* __restrict__ s, const float* __restrict__ t,
                                float* __restrict__ y, int64_t rows, int64_t cols) {
    const int64_t block = CB;
#pragma omp parallel for schedule(static, CHUNK) num_threads(THREADS)
    for (int64_t i = 0; i < rows; ++i) {
        const float* __restrict__ xr = x + i * cols;
        const float* __restrict__ rr = r + i * cols;
        float* __restrict__ yr = y + i * cols;
        for (int64_t j0 = 0; j0 < cols; j0 += block) {
            const int64_t j1 = j0 + block < cols ? j0 + block : cols;
            for (int64_t j = j0; j < j1; ++j) {
                const float v = xr[j] + rr[j];
                yr[j] = 0.5f * v * (1.0f + std::erf(v * 0.70710678118654752f)) * s[j] + t[j];
            }
        }
    }
}
