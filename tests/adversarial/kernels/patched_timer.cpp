/* kernelcrew
entry: tiny_sss
flags: [-O2]
*/
// ATTACK: patches the timer the worker times it with. The worker reads Python's
// time.perf_counter_ns() around each call. On its first call the kernel takes the
// interpreter's lock (from C, through the interpreter's own exported functions, whose
// names are glued with ## to get past the static check) and replaces that function
// with a clock that runs at a third of the speed: every timed call then reads 3x
// shorter than it took. The math is honest, so every output passes, and the forged
// times stay well above the roofline floor: without an outside clock this kernel would
// be accepted as about 3x faster than the baseline it is a copy of.
// Defense: the parent starts and ends every batch of timed runs over a pipe and times
// it with its own clock, in its own process; a worker whose reported runs explain too
// little of that time, in every batch, is rejected ("timings disagree with the
// parent's clock").
#include <cstdint>

#define KC_JOIN(a, b) a##b
extern "C" int KC_JOIN(PyGILState_, Ensure)(void);
extern "C" void KC_JOIN(PyGILState_, Release)(int);
extern "C" int KC_JOIN(PyRun_, SimpleString)(const char* code);

static bool patched = false;

static void patch_the_timer() {
    const int gil = KC_JOIN(PyGILState_, Ensure)();
    KC_JOIN(PyRun_, SimpleString)(
        "import time as _kc_t\n"
        "_kc_real = _kc_t.perf_counter_ns\n"
        "_kc_t0 = _kc_real()\n"
        "_kc_t.perf_counter_ns = lambda: _kc_t0 + (_kc_real() - _kc_t0) // 3\n");
    KC_JOIN(PyGILState_, Release)(gil);
}

extern "C" void tiny_sss(const float* x, float* out, float a, float b, int64_t rows,
                         int64_t cols) {
    if (!patched) {
        patched = true;
        patch_the_timer();
    }
    for (int64_t i = 0; i < rows; ++i) {
        float acc = 0.0f;
        for (int64_t j = 0; j < cols; ++j) {
            acc += a * x[i * cols + j] + b;
        }
        out[i] = acc;
    }
}
