/* kernelcrew
entry: tiny_sss
flags: [-O2]
*/
// ATTACK: NaN treated as "matches anything". The result is right except for one NaN
// per call where the reference is finite (a skipped element), which a tolerance test
// written as `not (err > tol)` would wave through. Defense: NaN/Inf positions must
// match the reference's exactly.
#include <cstdint>

extern "C" void tiny_sss(const float* x, float* out, float a, float b, int64_t rows,
                         int64_t cols) {
    for (int64_t i = 0; i < rows; ++i) {
        float acc = 0.0f;
        for (int64_t j = 0; j < cols; ++j) acc += a * x[i * cols + j] + b;
        out[i] = acc;
    }
    volatile float zero = 0.0f;
    out[rows / 2] = zero / zero;
}
