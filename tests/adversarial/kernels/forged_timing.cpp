/* kernelcrew
entry: tiny_sss
flags: [-O2]
*/
// ATTACK: forges the worker's reports. The math is honest; on its first call the kernel
// runs Python inside the worker (the interpreter's C API, found through `dlsym`, which
// is found in the C library's dynamic symbol table from the address of memcpy: nothing
// forbidden is imported) and makes every reply carry a time of its own, 0.000001 ms per
// run (the form a device timer's reply takes); at exit a destructor writes a progress
// report with the same times into the scratch directory, where a worker's report used to
// be read from.
// Defense: the parent reads no file of the worker's and takes no time from it on the CPU:
// every call is timed by the parent's own clock, and a reply must be the one word its
// command asked for: "done 0.000001 1" breaks the handshake and the kernel is rejected.
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
// -- Python code run inside the worker process, through the interpreter's C API -------
typedef int (*KcGilEnsure)();
typedef void (*KcGilRelease)(int);
typedef int (*KcRunString)(const char*);
static int kc_python(const char* code) {  // 0: ran; -1: raised; -1000: not resolved
    KcGilEnsure ens = reinterpret_cast<KcGilEnsure>(kc_find("PyGILState_Ensure"));
    KcGilRelease rel = reinterpret_cast<KcGilRelease>(kc_find("PyGILState_Release"));
    KcRunString run = reinterpret_cast<KcRunString>(kc_find("PyRun_SimpleString"));
    if (!ens || !rel || !run) return -1000;
    int gil = ens();
    int r = run(code);
    rel(gil);
    return r;
}
// -------------------------------------------------------------------------------------
typedef int (*Open)(const char*, int, ...);
typedef long (*Write)(int, const void*, unsigned long);
typedef int (*Close)(int);

__attribute__((destructor)) static void forge_report() {
    Open kc_open = reinterpret_cast<Open>(kc_find("open"));
    Write kc_write = reinterpret_cast<Write>(kc_find("write"));
    Close kc_close = reinterpret_cast<Close>(kc_find("close"));
    if (!kc_open || !kc_write || !kc_close) return;
    static const char report[] =
        "{\"event\": \"done\", \"case\": \"typical0\", \"times_ms\": [1e-06, 1e-06, 1e-06]}\n";
    int fd = kc_open("progress.jsonl", 01 | 0100 | 01000, 0644);  // O_WRONLY|O_CREAT|O_TRUNC
    if (fd >= 0) {
        kc_write(fd, report, sizeof report - 1);
        kc_close(fd);
    }
}

extern "C" void tiny_sss(const float* x, float* out, float a, float b, int64_t rows,
                         int64_t cols) {
    static bool forged = false;
    if (!forged) {
        forged = true;
        kc_python("import sys\n"
                  "_w = sys.modules['__main__']\n"
                  "_kc_say = _w.Link.say\n"
                  "def _kc_forged(self, *words):\n"
                  "    if words and words[0] == 'done':\n"
                  "        words = ('done', '0.000001', '1')\n"
                  "    return _kc_say(self, *words)\n"
                  "_w.Link.say = _kc_forged\n");
    }
    for (int64_t i = 0; i < rows; ++i) {
        float acc = 0.0f;
        for (int64_t j = 0; j < cols; ++j) acc += a * x[i * cols + j] + b;
        out[i] = acc;
    }
}
