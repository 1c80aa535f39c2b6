/* kernelcrew
entry: tiny_sss
flags: [-O2]
*/
// ATTACK: a helper process, outside the worker the parent stops. The first call forks
// (through `dlsym`, found in the C library's dynamic symbol table from the address of
// memcpy: nothing forbidden is imported); the child spins for as long as it lives, so it
// keeps running while the worker is stopped and takes a CPU from the other kernel's
// timed runs. It tries libc's fork, vfork (as a raw system call) and clone3 by number
// with no CLONE_THREAD, then execve of /bin/true as a last resort.
// Defense: the worker's seccomp guard refuses fork, vfork, clone without CLONE_THREAD
// and execve with EPERM (under the stock confinement clone3 gets ENOSYS from the
// sandbox's filter). The kernel writes what each call returned as minus errno: fork in
// out[0], vfork in out[1], clone3 in out[2], execve in out[3]; a process made would read
// as its PID, an exec as nothing at all.
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
typedef int (*Exec)(const char*, char* const*, char* const*);
typedef int* (*Errno)();

#if defined(__x86_64__)
static const long NR_VFORK = 58, NR_CLONE3 = 435;
#else
static const long NR_VFORK = -1, NR_CLONE3 = 435;  // aarch64 has no vfork call
#endif

static void helper() {
    volatile unsigned long spins = 0;
    for (;;) spins = spins + 1;
}

extern "C" void tiny_sss(const float* x, float* out, float a, float b, int64_t rows,
                         int64_t cols) {
    static long got[4] = {-1000, -1000, -1000, -1000};  // -1000: not resolved
    static bool tried = false;
    if (!tried) {
        tried = true;
        Fork kc_fork = reinterpret_cast<Fork>(kc_find("fork"));
        Sys kc_sys = reinterpret_cast<Sys>(kc_find("syscall"));
        Exec kc_exec = reinterpret_cast<Exec>(kc_find("execve"));
        Errno kc_errno = reinterpret_cast<Errno>(kc_find("__errno_location"));
        if (kc_fork && kc_sys && kc_exec && kc_errno) {
            long r = kc_fork();
            if (r == 0) helper();
            got[0] = r < 0 ? -*kc_errno() : r;
            r = NR_VFORK > 0 ? kc_sys(NR_VFORK) : -1;
            if (r == 0) helper();
            got[1] = r < 0 ? -*kc_errno() : r;
            uint64_t args[11] = {0, 0, 0, 17 /* exit_signal SIGCHLD */};
            r = kc_sys(NR_CLONE3, args, (long)sizeof args);
            if (r == 0) helper();
            got[2] = r < 0 ? -*kc_errno() : r;
            char* const argv[] = {const_cast<char*>("true"), nullptr};
            r = kc_exec("/bin/true", argv, argv + 1);
            got[3] = r < 0 ? -*kc_errno() : r;
        }
    }
    for (int64_t i = 0; i < rows; ++i) {
        float acc = 0.0f;
        for (int64_t j = 0; j < cols; ++j) acc += a * x[i * cols + j] + b;
        out[i] = acc;
    }
    for (int64_t i = 0; i < 4 && i < rows; ++i) out[i] = (float)got[i];
}
