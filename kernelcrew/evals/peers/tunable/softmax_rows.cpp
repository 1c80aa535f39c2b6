/* kernelcrew
entry: softmax_rows
flags: [-O3, -march=native, -fopenmp]
knobs: {ACC: 1, THREADS: 1, CHUNK: 1}
*/
// knob space: {ACC: [1, 2, 4, 8, 16], THREADS: [1, 2], CHUNK: [1, 8, 64]}
// Tunable row softmax for the Kernel Tuner comparison: the row max and the row sum use
// ACC independent partial results (so the reductions can vectorize); rows are split over
// THREADS threads in chunks of CHUNK rows.
#include <cmath>
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

extern "C" void softmax_rows(const float* __restrict__ x, float* __restrict__ y,
                             int64_t rows, int64_t cols) {
#pragma omp parallel for schedule(static, CHUNK) num_threads(THREADS)
    for (int64_t i = 0; i < rows; ++i) {
        const float* __restrict__ xr = x + i * cols;
        float* __restrict__ yr = y + i * cols;
        float mx[ACC];
        for (int u = 0; u < ACC; ++u) {
            mx[u] = xr[0];
        }
        int64_t j = 0;
        for (; j + ACC <= cols; j += ACC) {
            for (int u = 0; u < ACC; ++u) {
                mx[u] = xr[j + u] > mx[u] ? xr[j + u] : mx[u];
            }
        }
        float m = mx[0];
        for (int u = 1; u < ACC; ++u) {
            m = mx[u] > m ? mx[u] : m;
        }
        for (; j < cols; ++j) {
            m = xr[j] > m ? xr[j] : m;
        }
        float sum[ACC] = {};
        j = 0;
        for (; j + ACC <= cols; j += ACC) {
            for (int u = 0; u < ACC; ++u) {
                const float e = std::exp(xr[j + u] - m);
                yr[j + u] = e;
                sum[u] += e;
            }
        }
        float s = 0.0f;
        for (int u = 0; u < ACC; ++u) {
            s += sum[u];
        }
        for (; j < cols; ++j) {
            const float e = std::exp(xr[j] - m);
            yr[j] = e;
            s += e;
        }
        const float inv = 1.0f / s;
        for (j = 0; j < cols; ++j) {
            yr[j] *= inv;
        }
    }
}
