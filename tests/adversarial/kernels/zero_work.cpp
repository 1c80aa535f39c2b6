/* kernelcrew
entry: tiny_sss
flags: [-O2]
*/
// ATTACK: does no work and claims it did. While the worker loads the library, a
// constructor runs Python inside the worker process (the interpreter's C API, found
// through `dlsym`, which is found in the C library's dynamic symbol table from the
// address of memcpy: nothing forbidden is imported) and replaces the worker's call of the
// kernel with a function that returns at once: every command is answered "done", in no
// time, and the kernel never runs.
// Defense: nothing the worker says is a result. The parent poisons the outputs before
// every call and reads them from its own mapping afterwards: they still hold the poison.
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
__attribute__((constructor)) static void hijack() {
    kc_python("import sys\n"
              "for _m in (sys.modules.get('__main__'),\n"
              "           sys.modules.get('kernelcrew.tools.judge.worker')):\n"
              "    if _m is not None and hasattr(_m, 'CpuRuntime'):\n"
              "        _m.CpuRuntime.call = lambda self, *args: ''\n");
}

extern "C" void tiny_sss(const float* x, float* out, float a, float b, int64_t rows,
                         int64_t cols) {
    (void)x; (void)out; (void)a; (void)b; (void)rows; (void)cols;
}
