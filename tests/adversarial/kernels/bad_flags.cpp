/* kernelcrew
entry: tiny_sss
flags: [-O2, "-include/etc/passwd"]
*/
// ATTACK: flags outside the allow-list. `-include FILE` would make the compiler read a
// host file (and print its lines in errors). Defense: flags are checked against an
// allow-list of optimization flags before anything runs.
#include <cstdint>

extern "C" void tiny_sss(const float* x, float* out, float a, float b, int64_t rows,
                         int64_t cols) {
    for (int64_t i = 0; i < rows; ++i) {
        float acc = 0.0f;
        for (int64_t j = 0; j < cols; ++j) acc += a * x[i * cols + j] + b;
        out[i] = acc;
    }
}
