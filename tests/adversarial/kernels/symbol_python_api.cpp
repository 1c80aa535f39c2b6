/* kernelcrew
entry: tiny_sss
flags: [-O2]
*/
// ATTACK: runs Python inside the worker process to patch the worker's timer: on its
// first call it takes the interpreter's lock and replaces time.perf_counter_ns with a
// clock running at a third of the speed, through the interpreter's exported C API
// (names glued with ## to get past the static text check).
// Defense (this file: the first layer): after compiling, the library's undefined
// dynamic symbols must be on the allow-list; the Python C API is not, and the kernel is
// refused before it runs, naming `PyGILState_Ensure`. patched_timer.cpp finds the same
// functions without importing them and meets the runtime layers instead.
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
