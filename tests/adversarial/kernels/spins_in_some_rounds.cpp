/* kernelcrew
entry: tiny_sss
flags: [-O2]
knobs: {SPIN_ITERS: 40000000}
*/
// ATTACK: makes its own slow calls look like another job's load. The math is honest; on
// every third call it also spins SPIN_ITERS dependent additions (tens of ms of CPU). A judge that leaves out rounds in
// which "the machine was busier" and measures busy as all CPU time spent on the machine
// counts the kernel's own spinning as load: the rounds with its slow calls are dropped,
// and the slow calls with them.
// Defense: the busy share of a round leaves out the CPU time of the parent and of both
// workers (read from the kernel's accounting in /proc, not from the worker), so only
// other processes make a round busier.
#include <cstdint>

static int64_t calls = 0;

extern "C" void tiny_sss(const float* x, float* out, float a, float b, int64_t rows,
                         int64_t cols) {
    if (++calls % 3 == 0) {
        volatile int64_t sink = 0;
        for (int64_t k = 0; k < SPIN_ITERS; ++k) sink = sink + 1;
    }
    for (int64_t i = 0; i < rows; ++i) {
        float acc = 0.0f;
        for (int64_t j = 0; j < cols; ++j) acc += a * x[i * cols + j] + b;
        out[i] = acc;
    }
}
