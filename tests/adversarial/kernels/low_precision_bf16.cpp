/* kernelcrew
entry: tiny_sss
flags: [-O2]
*/
// ATTACK: lower precision than asked. Each input is truncated to bfloat16 (the top 16
// bits of the float) before use, as a kernel reading a bf16 copy would. Defense: the
// float64 reference at the op's tolerance.
#include <cstdint>
#include <cstring>

static float to_bf16(float v) {
    uint32_t u;
    std::memcpy(&u, &v, 4);
    u &= 0xFFFF0000u;
    std::memcpy(&v, &u, 4);
    return v;
}

extern "C" void tiny_sss(const float* x, float* out, float a, float b, int64_t rows,
                         int64_t cols) {
    for (int64_t i = 0; i < rows; ++i) {
        float acc = 0.0f;
        for (int64_t j = 0; j < cols; ++j) acc += to_bf16(a) * to_bf16(x[i * cols + j]) + b;
        out[i] = acc;
    }
}
