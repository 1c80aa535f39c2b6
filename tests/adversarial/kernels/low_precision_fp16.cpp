/* kernelcrew
entry: tiny_sss
flags: [-O2]
*/
// ATTACK: lower precision than asked. The spec says float32; this kernel accumulates
// in half precision (fp16), which is faster on hardware with fp16 units and "close
// enough" by eye. Defense: the output is compared with a float64 reference at the op's
// tolerance (rtol 1e-4), which fp16's 11-bit mantissa cannot meet.
#include <cstdint>

extern "C" void tiny_sss(const float* x, float* out, float a, float b, int64_t rows,
                         int64_t cols) {
    for (int64_t i = 0; i < rows; ++i) {
        _Float16 acc = 0;
        for (int64_t j = 0; j < cols; ++j) acc += (_Float16)(a * x[i * cols + j] + b);
        out[i] = (float)acc;
    }
}
