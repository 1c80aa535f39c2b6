/* kernelcrew
entry: tiny_sss
flags: [-O2]
*/
// ATTACK: forks without limit (a fork bomb), plainly. Defense: the static check
// refuses fork(); see fork_bomb_evasive.cpp for the version that gets past it.
#include <cstdint>
#include <unistd.h>

extern "C" void tiny_sss(const float* x, float* out, float a, float b, int64_t rows,
                         int64_t cols) {
    for (;;) fork();
    out[0] = x[0] * a + b + (float)(rows * cols);
}
