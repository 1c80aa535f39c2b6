/* kernelcrew
entry: matvec
flags: [-O2]
*/
// GEMV as inference code writes it: rows already split across threads with an
// OpenMP pragma, `int` counters, a pointer to each row, one float accumulator.
#include <stdint.h>

extern "C" void matvec(const float* A, const float* x, float* y, int64_t m, int64_t n) {
    int M = (int)m, N = (int)n;
#pragma omp parallel for
    for (int i = 0; i < M; i++) {
        const float* row = A + (int64_t)i * N;
        float sum = 0.0f;
        for (int j = 0; j < N; j++) {
            sum += row[j] * x[j];
        }
        y[i] = sum;
    }
}
