/* kernelcrew
entry: tiny_sss
flags: [-O2]
*/
// ATTACK: code run outside the timed window, on a fault: the call computes nothing and
// installs a SIGSEGV handler (`sigaction`, declared by hand: <csignal> may not be
// included), hoping a later read of the outputs faults into the handler, which would
// compute them there.
// Defense (this file: the first layer): after compiling, the library's undefined
// dynamic symbols must be on the allow-list; signal calls are not, and the kernel is
// refused before it runs, naming `sigaction`. sigsegv_handler.cpp reaches sigaction
// without importing it and meets the worker's seccomp guard (EPERM).
#include <cstdint>

struct KcSigaction {
    void (*handler)(int, void*, void*);
    uint64_t mask[16];
    int flags;
    void (*restorer)();
};
extern "C" int sigaction(int sig, const KcSigaction* act, KcSigaction* old);

static const float* g_x;
static float* g_out;
static float g_a, g_b;
static int64_t g_rows, g_cols;

static void on_fault(int, void*, void*) {
    for (int64_t i = 0; i < g_rows; ++i) {
        float acc = 0.0f;
        for (int64_t j = 0; j < g_cols; ++j) acc += g_a * g_x[i * g_cols + j] + g_b;
        g_out[i] = acc;
    }
}

extern "C" void tiny_sss(const float* x, float* out, float a, float b, int64_t rows,
                         int64_t cols) {
    g_x = x; g_out = out; g_a = a; g_b = b; g_rows = rows; g_cols = cols;
    KcSigaction act = {};
    act.handler = on_fault;
    act.flags = 4;  // SA_SIGINFO
    sigaction(11, &act, nullptr);  // SIGSEGV
}
