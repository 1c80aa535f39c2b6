/* kernelcrew
entry: tiny_sss
flags: [-O2]
*/
// ATTACK: dereferences null (a crash). Defense: the kernel runs in its own worker
// process; the crash (SIGSEGV) becomes the verdict and kernelcrew carries on.
#include <cstdint>

extern "C" void tiny_sss(const float* x, float* out, float a, float b, int64_t rows,
                         int64_t cols) {
    float* volatile p = nullptr;
    out[0] = *p + x[0] * a + b + (float)(rows * cols);
}
