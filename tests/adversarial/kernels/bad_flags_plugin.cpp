/* kernelcrew
entry: tiny_sss
flags: [-O2, -fplugin=/tmp/evil.so, -Wl,-rpath=/tmp]
*/
// ATTACK: flags outside the allow-list: a compiler plugin (code run by the compiler)
// and linker options. Defense: the flag allow-list.
#include <cstdint>

extern "C" void tiny_sss(const float* x, float* out, float a, float b, int64_t rows,
                         int64_t cols) {
    for (int64_t i = 0; i < rows; ++i) {
        float acc = 0.0f;
        for (int64_t j = 0; j < cols; ++j) acc += a * x[i * cols + j] + b;
        out[i] = acc;
    }
}
