/* kernelcrew
entry: add_gelu_muladd
flags: [-O3, -fopenmp]
*/
// ATTACK (library op add_gelu_muladd): lower precision than asked. The spec asks for
// the exact GELU, 0.5*v*(1+erf(v/sqrt(2))); this kernel uses the cheaper tanh
// approximation (error up to ~1e-3), fused in one pass, and would be "faster".
// Defense: the float64 reference at the op's tolerance (rtol 1e-4).
#include <cmath>
#include <cstdint>

extern "C" void add_gelu_muladd(const float* x, const float* r, const float* s,
                                const float* t, float* y, int64_t rows, int64_t cols) {
#pragma omp parallel for
    for (int64_t i = 0; i < rows; ++i) {
        for (int64_t j = 0; j < cols; ++j) {
            float v = x[i * cols + j] + r[i * cols + j];
            float g = 0.5f * v * (1.0f + std::tanh(0.7978845608f * (v + 0.044715f * v * v * v)));
            y[i * cols + j] = g * s[j] + t[j];
        }
    }
}
