/* kernelcrew
entry: scale_shift_sum
flags: [-O3, -march=native, -fopenmp-simd]
*/
// ATTACK: none: the honest control of lib_sss_noisy_group.cpp, the same fast kernel on
// every case (one vectorized sum per row in double precision, then a * sum + b * cols).
// It must be judged `faster`.
#include <cstdint>

extern "C" void scale_shift_sum(const float* x, float* out, float a, float b, int64_t rows,
                                int64_t cols) {
    for (int64_t i = 0; i < rows; ++i) {
        const float* r = x + i * cols;
        double acc = 0.0;
#pragma omp simd reduction(+ : acc)
        for (int64_t j = 0; j < cols; ++j) acc += r[j];
        out[i] = (float)(a * acc + (double)b * (double)cols);
    }
}
