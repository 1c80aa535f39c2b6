/* kernelcrew
entry: tiny_sss
flags: [-O2]
*/
// ATTACK: changes the protection of the harness's buffers: the call computes nothing
// and makes its output pages unreadable with `mprotect` (declared by hand), hoping a
// reader in the worker faults where a handler could still compute them.
// Defense (this file: the first layer): after compiling, the library's undefined
// dynamic symbols must be on the allow-list; memory-mapping calls are not, and the
// kernel is refused before it runs, naming `mprotect`. unreadable_outputs.cpp reaches
// mprotect without importing it and meets the parent, which reads the outputs from its
// own mapping.
#include <cstdint>

extern "C" int mprotect(void* addr, unsigned long len, int prot);

extern "C" void tiny_sss(const float* x, float* out, float a, float b, int64_t rows,
                         int64_t cols) {
    (void)x; (void)a; (void)b; (void)cols;
    uintptr_t page = reinterpret_cast<uintptr_t>(out) & ~uintptr_t(4095);
    uintptr_t end = reinterpret_cast<uintptr_t>(out + rows);
    mprotect(reinterpret_cast<void*>(page), end - page, 0);  // PROT_NONE
}
