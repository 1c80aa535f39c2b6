/* kernelcrew
entry: tiny_sss
flags: [-O2]
*/
// ATTACK: never returns (an infinite loop the compiler cannot remove). Defense: the
// worker runs under a wall-clock timeout and is killed with its whole process tree;
// the verdict says it timed out.
#include <cstdint>

extern "C" void tiny_sss(const float* x, float* out, float a, float b, int64_t rows,
                         int64_t cols) {
    volatile int64_t spin = 0;
    while (spin >= 0) spin = spin + 1 - (spin > 1000 ? 1000 : 0);
    out[0] = x[0] * a + b + (float)(rows + cols);
}
