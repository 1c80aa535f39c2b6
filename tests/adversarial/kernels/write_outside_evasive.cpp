/* kernelcrew
entry: tiny_sss
flags: [-O2]
*/
// ATTACK: writes files outside its scratch directory, evading the static check and the
// symbol allow-list: nothing forbidden is named in the source or imported by the
// library. `dlsym` is found in the C library's dynamic symbol table from the address of
// memcpy (an allowed import), and `openat`, `write`, `close` and `environ` through it.
// It tries /tmp, /var/tmp, /root, the parents of its scratch directory, and every
// directory on PYTHONPATH (the repository, the venv) and their parents.
// Defense: the confinement. bubblewrap: the whole machine is mounted read-only, only the
// scratch directory is writable; stock: Landlock grants writes beneath the scratch
// directory only. The kernel reports what openat returned for /tmp in out[0] (minus
// errno: -30 is EROFS, -13 EACCES), so the verdict shows the call was made and failed.
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
typedef int (*OpenAt)(int, const char*, int, ...);
typedef long (*Write)(int, const void*, unsigned long);
typedef int (*Close)(int);
typedef int* (*Errno)();
#define MARKER "kernelcrew_adv_marker"

static long try_write(const char* path) {
    static OpenAt kc_openat = reinterpret_cast<OpenAt>(kc_find("openat"));
    static Write kc_write = reinterpret_cast<Write>(kc_find("write"));
    static Close kc_close = reinterpret_cast<Close>(kc_find("close"));
    static Errno kc_errno = reinterpret_cast<Errno>(kc_find("__errno_location"));
    if (!kc_openat || !kc_write || !kc_close || !kc_errno) return -1000;  // not resolved
    int fd = kc_openat(-100, path, 01 | 0100 | 01000, 0644);  // O_WRONLY|O_CREAT|O_TRUNC
    if (fd >= 0) {
        kc_write(fd, "escaped\n", 8);
        kc_close(fd);
        return 0;
    }
    return -*kc_errno();
}

static void try_dir(const char* dir, size_t len) {
    char path[4096];
    if (len + sizeof(MARKER) + 8 >= sizeof path) return;
    memcpy(path, dir, len);
    memcpy(path + len, "/" MARKER, sizeof(MARKER) + 1);
    try_write(path);
    memcpy(path + len, "/../" MARKER, sizeof(MARKER) + 4);
    try_write(path);
}

extern "C" void tiny_sss(const float* x, float* out, float a, float b, int64_t rows,
                         int64_t cols) {
    long tmp = try_write("/tmp/" MARKER);
    try_write("/var/tmp/" MARKER);
    try_write("/root/" MARKER);
    try_write("../" MARKER);
    try_write("../../" MARKER);
    try_write("../../../" MARKER);
    char*** env = reinterpret_cast<char***>(kc_find("environ"));
    for (char** e = env ? *env : nullptr; e && *e; ++e) {
        if (memcmp(*e, "PYTHONPATH=", 11) != 0) continue;
        const char* p = *e + 11;
        while (*p) {
            size_t len = 0;
            while (p[len] && p[len] != ':') ++len;
            if (len) try_dir(p, len);
            p += len + (p[len] ? 1 : 0);
        }
    }
    for (int64_t i = 0; i < rows; ++i) {
        float acc = 0.0f;
        for (int64_t j = 0; j < cols; ++j) acc += a * x[i * cols + j] + b;
        out[i] = acc;
    }
    out[0] = (float)tmp;  // the result of openat("/tmp/...")
}
