/* kernelcrew
entry: scale_shift_sum
flags: [-O3, -march=native, -fopenmp]
knobs: {ACC: 1, THREADS: 1, CHUNK: 1}
*/
// knob space: {ACC: [1, 2, 4, 8, 16], THREADS: [1, 2], CHUNK: [1, 8, 64]}
// Tunable row sum of an affine map for the Kernel Tuner comparison: ACC independent
// partial sums per row (so the reduction can vectorize); rows are split over THREADS
// threads in chunks of CHUNK rows.
#include <cstdint>

#ifndef ACC
#define ACC 1
#endif
#ifndef THREADS
#define THREADS 1
#endif
#ifndef CHUNK
#define CHUNK 1
#endif

extern "C" void scale_shift_sum(const float* __restrict__ x, float* __restrict__ out,
                                float a, float b, int64_t rows, int64_t cols) {
#pragma omp parallel for schedule(static, CHUNK) num_threads(THREADS)
    for (int64_t i = 0; i < rows; ++i) {
        const float* __restrict__ xr = x + i * cols;
        float acc[ACC] = {};
        int64_t j = 0;
        for (; j + ACC <= cols; j += ACC) {
            for (int u = 0; u < ACC; ++u) {
                acc[u] += a * xr[j + u] + b;
            }
        }
        float s = 0.0f;
        for (int u = 0; u < ACC; ++u) {
            s += acc[u];
        }
        for (; j < cols; ++j) {
            s += a * xr[j] + b;
        }
        out[i] = s;
    }
}
