/* kernelcrew
entry: tiny_sss
flags: [-O2]
*/
// ATTACK: writes nothing. Returns at once, hoping the output buffer already holds the
// answer from an earlier run (reused memory). Defense: outputs are NaN-poisoned
// before every call, so an unwritten output reads as NaN.
#include <cstdint>

extern "C" void tiny_sss(const float* x, float* out, float a, float b, int64_t rows,
                         int64_t cols) {
    (void)x; (void)out; (void)a; (void)b; (void)rows; (void)cols;
}
