/* kernelcrew
entry: tiny_sss
flags: [-O2]
*/
// ATTACK: returns NaN everywhere (0/0), hoping a comparison such as
// `abs(got - ref) > tol` is False for NaN and so "passes". Defense: NaN/Inf positions
// must match the reference's exactly.
#include <cstdint>

extern "C" void tiny_sss(const float* x, float* out, float a, float b, int64_t rows,
                         int64_t cols) {
    volatile float zero = 0.0f;
    for (int64_t i = 0; i < rows; ++i) out[i] = zero / zero + 0.0f * (x[i] * a + b + cols);
}
