/* kernelcrew
entry: tiny_sss
flags: [-O2]
*/
#include <cstdint>

// Naive baseline: one running float sum per row.
extern "C" void tiny_sss(const float* x, float* out, float a, float b, int64_t rows,
                         int64_t cols) {
    for (int64_t i = 0; i < rows; ++i) {
        float acc = 0.0f;
        for (int64_t j = 0; j < cols; ++j) {
            acc += a * x[i * cols + j] + b;
        }
        out[i] = acc;
    }
}
