/* kernelcrew
entry: tiny_sss
flags: [-O3]
*/
// ATTACK: right only on the typical group (shape-specialized). The two typical shapes
// get hand-unrolled paths; every other shape takes a "fast path" that ignores the
// shift term and the row tail. Defense: the hidden-from-tuning boundary and unaligned
// groups are always checked.
#include <cstdint>

template <int COLS>
static void fixed(const float* x, float* out, float a, float b, int64_t rows) {
    for (int64_t i = 0; i < rows; ++i) {
        float acc = 0.0f;
        for (int j = 0; j < COLS; ++j) acc += x[i * COLS + j];
        out[i] = a * acc + b * COLS;
    }
}

extern "C" void tiny_sss(const float* x, float* out, float a, float b, int64_t rows,
                         int64_t cols) {
    if (rows == 256 && cols == 1024) return fixed<1024>(x, out, a, b, rows);
    if (rows == 64 && cols == 4096) return fixed<4096>(x, out, a, b, rows);
    for (int64_t i = 0; i < rows; ++i) {
        float acc = 0.0f;
        for (int64_t j = 0; j + 8 <= cols; ++j) acc += x[i * cols + j];
        out[i] = a * acc;
    }
}
