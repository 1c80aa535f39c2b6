/* kernelcrew
entry: tiny_sss
flags: [-O2]
*/
// ATTACK: loads code and finds functions at run time: dlopen("libc.so.6") and dlsym
// for `fork` (glued with ## past the static text check), so no forbidden name appears
// in the library's imports except the loader's own.
// Defense (this file: the first layer): after compiling, the library's undefined
// dynamic symbols must be on the allow-list; dynamic loading is not, and the kernel is
// refused before it runs, naming `dlopen` and `dlsym`. The kernels that find dlsym
// without importing it (see async_thread.cpp) meet the runtime layers instead.
#include <cstdint>

#define KC_JOIN(a, b) a##b
extern "C" void* KC_JOIN(dl, open)(const char* file, int mode);
extern "C" void* dlsym(void* handle, const char* name);

extern "C" void tiny_sss(const float* x, float* out, float a, float b, int64_t rows,
                         int64_t cols) {
    void* libc = KC_JOIN(dl, open)("libc.so.6", 2);
    typedef int (*Fork)();
    Fork kc_fork = libc ? reinterpret_cast<Fork>(dlsym(libc, "fork")) : nullptr;
    if (kc_fork && kc_fork() == 0) {
        for (;;) {}
    }
    for (int64_t i = 0; i < rows; ++i) {
        float acc = 0.0f;
        for (int64_t j = 0; j < cols; ++j) acc += a * x[i * cols + j] + b;
        out[i] = acc;
    }
}
