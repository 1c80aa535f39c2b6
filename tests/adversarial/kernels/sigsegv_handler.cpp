/* kernelcrew
entry: tiny_sss
flags: [-O2]
*/
// ATTACK: code run on a fault, outside the timed window, and write access to the
// harness's inputs. The plan: install a SIGSEGV (and SIGBUS) handler, make the inputs
// writable or unreadable with mprotect, and let the handler see which pages the harness
// touches (the changed inputs of a timed run) or compute outputs when a reader faults.
// sigaction, signal and mprotect are not imported: `dlsym` is found in the C library's
// dynamic symbol table from the address of memcpy, and all three through it.
// Defense: the worker's seccomp guard refuses rt_sigaction (EPERM: no handler can be
// installed, for any signal), and the inputs are sealed memory mapped read-only
// (F_SEAL_FUTURE_WRITE: no mapping of them may become writable, EACCES). The parent
// changes inputs and reads outputs through its own mappings, which a fault in the worker
// never sees. The kernel writes what each attempt returned as minus errno: sigaction in
// out[0], signal in out[1], mprotect of the inputs to writable in out[2].
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
struct KcSigaction {
    void (*handler)(int, void*, void*);
    uint64_t mask[16];
    int flags;
    void (*restorer)();
};
typedef int (*SigAction)(int, const KcSigaction*, KcSigaction*);
typedef long (*Signal)(int, void (*)(int));
typedef int (*Protect)(void*, unsigned long, int);
typedef int* (*Errno)();

static volatile unsigned long faults = 0;
static void on_fault(int, void*, void*) { faults = faults + 1; }
static void on_bus(int) { faults = faults + 1; }

extern "C" void tiny_sss(const float* x, float* out, float a, float b, int64_t rows,
                         int64_t cols) {
    static long got[3] = {-1000, -1000, -1000};  // -1000: not resolved
    static bool tried = false;
    if (!tried) {
        tried = true;
        SigAction kc_sigaction = reinterpret_cast<SigAction>(kc_find("sigaction"));
        Signal kc_signal = reinterpret_cast<Signal>(kc_find("signal"));
        Protect kc_protect = reinterpret_cast<Protect>(kc_find("mprotect"));
        Errno kc_errno = reinterpret_cast<Errno>(kc_find("__errno_location"));
        if (kc_sigaction && kc_signal && kc_protect && kc_errno) {
            KcSigaction act;
            memset(&act, 0, sizeof act);
            act.handler = on_fault;
            act.flags = 4;  // SA_SIGINFO
            got[0] = kc_sigaction(11 /* SIGSEGV */, &act, nullptr) == 0 ? 0 : -*kc_errno();
            got[1] = kc_signal(7 /* SIGBUS */, on_bus) == -1 ? -*kc_errno() : 0;
            uintptr_t page = reinterpret_cast<uintptr_t>(x) & ~uintptr_t(4095);
            got[2] = kc_protect(reinterpret_cast<void*>(page), 4096, 1 | 2) == 0
                         ? 0 : -*kc_errno();  // PROT_READ | PROT_WRITE
        }
    }
    for (int64_t i = 0; i < rows; ++i) {
        float acc = 0.0f;
        for (int64_t j = 0; j < cols; ++j) acc += a * x[i * cols + j] + b;
        out[i] = acc;
    }
    for (int64_t i = 0; i < 3 && i < rows; ++i) out[i] = (float)got[i];
}
