/* kernelcrew
entry: tiny_sss
flags: [-O2]
*/
// ATTACK: hides a system call from the static check behind a C++14 digit separator.
// `1'0` is the number 10, but a check that takes every `'` for the start of a character
// literal blanks the rest of the line, `syscall(...)` included.
// Defense: the static check knows digit separators, sees the call and refuses it.
#include <cstdint>

static const long kTen = 1'0; extern "C" long syscall(long number, ...);

extern "C" void tiny_sss(const float* x, float* out, float a, float b, int64_t rows,
                         int64_t cols) {
    long k = 1'0, r = syscall(39 /* getpid */);
    for (int64_t i = 0; i < rows; ++i) {
        float acc = 0.0f;
        for (int64_t j = 0; j < cols; ++j) acc += a * x[i * cols + j] + b;
        out[i] = acc + 0.0f * (float)(k + r);
    }
}
