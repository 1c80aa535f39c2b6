/* kernelcrew
entry: tiny_sss
flags: [-O2]
*/
// ATTACK: forks without limit (a fork bomb), evading the static check: `fork` is
// built with ## after the text check. Every child forks again, forever.
// Defense: the sandbox caps the number of processes (a pids cgroup where the machine
// allows one, else RLIMIT_NPROC; root ignores RLIMIT_NPROC), the worker's wall-clock
// timeout kills it, and bubblewrap's own PID namespace takes every child with it. The
// next kernel gets a fresh worker and is judged normally.
#include <cstdint>

#define KC_JOIN(a, b) a##b
extern "C" int KC_JOIN(fo, rk)(void);

extern "C" void tiny_sss(const float* x, float* out, float a, float b, int64_t rows,
                         int64_t cols) {
    volatile int forever = 1;
    while (forever) KC_JOIN(fo, rk)();
    out[0] = x[0] * a + b + (float)(rows * cols);
}
