/* kernelcrew
entry: tiny_sss
flags: [-O2]
*/
// ATTACK: computes nothing in the call and makes its outputs unreadable: mprotect turns
// the output pages to PROT_NONE, so a reader in the worker's process (a worker that
// copied or saved the outputs itself) faults, and a SIGSEGV handler installed beforehand
// computes the outputs there, outside the timed window, and makes the pages readable
// again. sigaction and mprotect are not imported: `dlsym` is found in the C library's
// dynamic symbol table from the address of memcpy, and both through it.
// Defense: the parent reads the outputs from its own mapping of the memory it owns: the
// worker's page protections do not apply to it and nothing faults. What it reads is the
// poison it wrote before the call. (The seccomp guard refuses the handler as well.)
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
typedef int (*Protect)(void*, unsigned long, int);

struct Job { const float* x; float* out; float a, b; int64_t rows, cols; };
static Job job;

static void compute_on_fault(int, void*, void*) {
    static Protect kc_protect = reinterpret_cast<Protect>(kc_find("mprotect"));
    uintptr_t page = reinterpret_cast<uintptr_t>(job.out) & ~uintptr_t(4095);
    uintptr_t end = reinterpret_cast<uintptr_t>(job.out + job.rows);
    if (kc_protect) kc_protect(reinterpret_cast<void*>(page), end - page, 1 | 2);
    for (int64_t i = 0; i < job.rows; ++i) {
        float acc = 0.0f;
        for (int64_t j = 0; j < job.cols; ++j) acc += job.a * job.x[i * job.cols + j] + job.b;
        job.out[i] = acc;
    }
}

extern "C" void tiny_sss(const float* x, float* out, float a, float b, int64_t rows,
                         int64_t cols) {
    static SigAction kc_sigaction = reinterpret_cast<SigAction>(kc_find("sigaction"));
    static Protect kc_protect = reinterpret_cast<Protect>(kc_find("mprotect"));
    static bool handler = false;
    if (!handler && kc_sigaction) {
        KcSigaction act;
        memset(&act, 0, sizeof act);
        act.handler = compute_on_fault;
        act.flags = 4 | 0x40000000;  // SA_SIGINFO | SA_NODEFER
        handler = true;
        kc_sigaction(11 /* SIGSEGV */, &act, nullptr);
    }
    job = Job{x, out, a, b, rows, cols};
    uintptr_t page = reinterpret_cast<uintptr_t>(out) & ~uintptr_t(4095);
    uintptr_t end = reinterpret_cast<uintptr_t>(out + rows);
    if (kc_protect) kc_protect(reinterpret_cast<void*>(page), end - page, 0);  // PROT_NONE
}
