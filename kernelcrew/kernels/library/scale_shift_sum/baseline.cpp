/* kernelcrew
entry: scale_shift_sum
flags: [-O2]
*/
#include <cstdint>

// Naive CPU baseline: one pass per row with a single running float sum,
// applying the affine map to every element before adding it.
extern "C" void scale_shift_sum(const float* x, float* out, float a, float b,
                                int64_t rows, int64_t cols) {
    for (int64_t i = 0; i < rows; ++i) {
        float acc = 0.0f;
        for (int64_t j = 0; j < cols; ++j) {
            acc += a * x[i * cols + j] + b;
        }
        out[i] = acc;
    }
}
