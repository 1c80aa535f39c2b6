/* kernelcrew
entry: tiny_sss
flags: [-O2]
*/
// ATTACK: slows the other kernel. The math is honest, but the first call starts a thread
// that spins for as long as the process lives (pthread_create is refused by the static
// check, so the name is built with ##): in a duel it takes a CPU from whatever runs
// next, the baseline's timed runs. Defense: before each of the other kernel's runs the
// parent waits for this worker's threads to stop running (an OpenMP team stops spinning
// within milliseconds); when they never do, the kernel is rejected for it.
#include <cstdint>

#define KC_JOIN(a, b) a##b
extern "C" int KC_JOIN(pthread_, create)(unsigned long* id, const void* attr,
                                         void* (*fn)(void*), void* arg);

static volatile unsigned long spins = 0;

static void* spin(void*) {
    for (;;) spins = spins + 1;
    return nullptr;
}

extern "C" void tiny_sss(const float* x, float* out, float a, float b, int64_t rows,
                         int64_t cols) {
    static bool started = false;
    if (!started) {
        unsigned long id;
        started = KC_JOIN(pthread_, create)(&id, nullptr, spin, nullptr) == 0;
    }
    for (int64_t i = 0; i < rows; ++i) {
        float acc = 0.0f;
        for (int64_t c = 0; c < cols; ++c) acc += a * x[i * cols + c] + b;
        out[i] = acc;
    }
}
