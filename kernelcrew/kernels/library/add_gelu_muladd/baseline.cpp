/* kernelcrew
entry: add_gelu_muladd
flags: [-O2]
*/
#include <cmath>
#include <cstdint>

// Naive CPU baseline: three separate full passes over the tensor, using the
// output y as the intermediate buffer (add, then exact GELU, then scale/shift).
extern "C" void add_gelu_muladd(const float* x, const float* r, const float* s,
                                const float* t, float* y, int64_t rows, int64_t cols) {
    // pass 1: y = x + r
    for (int64_t i = 0; i < rows; ++i) {
        for (int64_t j = 0; j < cols; ++j) {
            y[i * cols + j] = x[i * cols + j] + r[i * cols + j];
        }
    }
    // pass 2: y = gelu(y) = 0.5 * y * (1 + erf(y / sqrt(2)))
    for (int64_t i = 0; i < rows; ++i) {
        for (int64_t j = 0; j < cols; ++j) {
            float v = y[i * cols + j];
            y[i * cols + j] = 0.5f * v * (1.0f + std::erf(v * 0.70710678118654752f));
        }
    }
    // pass 3: y = y * s[col] + t[col]
    for (int64_t i = 0; i < rows; ++i) {
        for (int64_t j = 0; j < cols; ++j) {
            y[i * cols + j] = y[i * cols + j] * s[j] + t[j];
        }
    }
}
