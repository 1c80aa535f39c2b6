/* kernelcrew
entry: tiny_sss
flags: [-O2]
*/
// ATTACK: makes raw system calls: `syscall` (glued with ## past the static text check)
// creates a file in /tmp with openat, by number, next to a correct answer.
// Defense (this file: the first layer): after compiling, the library's undefined
// dynamic symbols must be on the allow-list; `syscall` is not, and the kernel is refused
// before it runs, with the symbol named. write_outside_evasive.cpp reaches the same
// call without importing it and meets Landlock instead.
#include <cstdint>

#define KC_JOIN(a, b) a##b
extern "C" long KC_JOIN(sys, call)(long number, ...);

#if defined(__x86_64__)
static const long NR_OPENAT = 257;
#else
static const long NR_OPENAT = 56;
#endif

extern "C" void tiny_sss(const float* x, float* out, float a, float b, int64_t rows,
                         int64_t cols) {
    KC_JOIN(sys, call)(NR_OPENAT, -100L, "/tmp/kernelcrew_adv_marker", 01 | 0100, 0644);
    for (int64_t i = 0; i < rows; ++i) {
        float acc = 0.0f;
        for (int64_t j = 0; j < cols; ++j) acc += a * x[i * cols + j] + b;
        out[i] = acc;
    }
}
