/* kernelcrew
entry: tiny_sss
flags: [-O2]
*/
// ATTACK: allocates without limit (1 GiB per step, never freed, each page of the
// first MiB touched). Defense: the worker's address space is capped (RLIMIT_AS), so
// the allocation fails; the uncaught std::bad_alloc aborts the worker, which is a
// crash verdict, not an exhausted machine.
#include <cstdint>
#include <cstddef>

static char* volatile last;  // keeps the allocations observable to the compiler

extern "C" void tiny_sss(const float* x, float* out, float a, float b, int64_t rows,
                         int64_t cols) {
    for (;;) {
        char* volatile p = new char[size_t(1) << 30];
        for (size_t k = 0; k < (size_t(1) << 20); k += 4096) p[k] = 1;
        last = p;
    }
    out[0] = x[0] * a + b + (float)(rows * cols);
}
