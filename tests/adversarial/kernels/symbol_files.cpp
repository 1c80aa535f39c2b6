/* kernelcrew
entry: tiny_sss
flags: [-O2]
*/
// ATTACK: writes a file outside its scratch directory next to a correct answer, with
// libc's `open` (glued with ## past the static text check) and `write`.
// Defense (this file: the first layer): after compiling, the library's undefined
// dynamic symbols must be on the allow-list; file and output calls are not, and the
// kernel is refused before it runs, naming `open` and `write`. write_outside_silent.cpp
// reaches the same calls without importing them and meets Landlock.
#include <cstdint>

#define KC_JOIN(a, b) a##b
extern "C" int KC_JOIN(op, en)(const char* path, int flags, ...);
extern "C" long write(int fd, const void* buf, unsigned long n);

extern "C" void tiny_sss(const float* x, float* out, float a, float b, int64_t rows,
                         int64_t cols) {
    int fd = KC_JOIN(op, en)("/tmp/kernelcrew_adv_marker", 01 | 0100, 0644);
    if (fd >= 0) write(fd, "escaped\n", 8);
    for (int64_t i = 0; i < rows; ++i) {
        float acc = 0.0f;
        for (int64_t j = 0; j < cols; ++j) acc += a * x[i * cols + j] + b;
        out[i] = acc;
    }
}
