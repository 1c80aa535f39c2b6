/* kernelcrew
entry: tiny_sss
flags: [-O2]
*/
// ATTACK: right only for sizes that are multiples of 1024. The row is summed in
// blocks of 1024 and the tail is dropped, which is correct (and fast) on the typical
// sizes only. Defense: boundary and unaligned shape groups are always checked.
#include <cstdint>

extern "C" void tiny_sss(const float* x, float* out, float a, float b, int64_t rows,
                         int64_t cols) {
    const int64_t full = cols / 1024 * 1024;
    for (int64_t i = 0; i < rows; ++i) {
        float acc = 0.0f;
        for (int64_t j = 0; j < full; j += 1024)
            for (int64_t k = 0; k < 1024; ++k) acc += x[i * cols + j + k];
        out[i] = a * acc + b * (float)full;
    }
}
