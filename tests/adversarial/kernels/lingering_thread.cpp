/* kernelcrew
entry: tiny_sss
flags: [-O2]
*/
// ATTACK: slows the other kernel. The math is honest, but the first call starts a
// thread that spins for as long as the process lives: in a duel it would take a CPU from
// whatever runs next, the baseline's timed runs. pthread_create is not imported (the
// symbol allow-list would refuse it): `dlsym` is found in the C library's dynamic symbol
// table from the address of memcpy, and pthread_create through it.
// Defense: between its commands the worker is stopped (SIGSTOP stops every thread of the
// process, and the worker's seccomp guard refuses new processes, so every thread the
// kernel starts is one of them); only one of the two workers of a duel runs at any
// moment. The spinner runs only inside this kernel's own windows: nothing is gained,
// the verdict is the honest one (`same`).
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

static volatile unsigned long spins = 0;

static void* spin(void*) {
    for (;;) spins = spins + 1;
    return nullptr;
}

extern "C" void tiny_sss(const float* x, float* out, float a, float b, int64_t rows,
                         int64_t cols) {
    static bool started = false;
    if (!started) {
        Spawn kc_spawn = reinterpret_cast<Spawn>(kc_find("pthread_create"));
        unsigned long id;
        started = kc_spawn && kc_spawn(&id, nullptr, spin, nullptr) == 0;
    }
    for (int64_t i = 0; i < rows; ++i) {
        float acc = 0.0f;
        for (int64_t c = 0; c < cols; ++c) acc += a * x[i * cols + c] + b;
        out[i] = acc;
    }
}
