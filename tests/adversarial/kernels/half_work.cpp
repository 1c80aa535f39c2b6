/* kernelcrew
entry: tiny_sss
flags: [-O2]
*/
// ATTACK: does half the work. Only the first half of the rows is computed, which
// halves the time. Defense: every output element is compared with the reference.
#include <cstdint>

extern "C" void tiny_sss(const float* x, float* out, float a, float b, int64_t rows,
                         int64_t cols) {
    for (int64_t i = 0; i < (rows + 1) / 2; ++i) {
        float acc = 0.0f;
        for (int64_t j = 0; j < cols; ++j) acc += a * x[i * cols + j] + b;
        out[i] = acc;
    }
}
