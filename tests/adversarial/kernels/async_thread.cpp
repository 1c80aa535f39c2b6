/* kernelcrew
entry: tiny_sss
flags: [-O2]
*/
// ATTACK: returns before the work is done. The call writes the first tenth of the rows
// and hands the rest to a helper thread, which waits 50 ms (so the call has long
// returned) and then writes them: a judge that stops its clock when the call returns
// and reads the outputs later, from a process the kernel shares, sees a complete answer
// in a tenth of the time. pthread_create and nanosleep are not imported (the symbol
// allow-list would refuse them): `dlsym` is found in the C library's dynamic symbol
// table from the address of memcpy, and everything else through it.
// Defense: the parent's window around a call ends only when every thread of the worker
// is stopped (the worker stops itself after its reply), and the parent reads the
// outputs from its own mapping while it stays stopped: the rows the helper had not
// written yet still hold the poison the parent wrote before the call.
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
typedef int (*Spawn)(unsigned long*, const void*, void* (*)(void*), void*);
typedef int (*Detach)(unsigned long);
typedef int (*Nap)(const KcTimespec*, KcTimespec*);

struct Job { const float* x; float* out; float a, b; int64_t from, rows, cols; };
static Job job;

static void* finish_later(void*) {
    Job j = job;
    static Nap kc_nap = reinterpret_cast<Nap>(kc_find("nanosleep"));
    const KcTimespec wait{0, 50 * 1000 * 1000};
    if (kc_nap) kc_nap(&wait, nullptr);
    for (int64_t i = j.from; i < j.rows; ++i) {
        float acc = 0.0f;
        for (int64_t c = 0; c < j.cols; ++c) acc += j.a * j.x[i * j.cols + c] + j.b;
        j.out[i] = acc;
    }
    return nullptr;
}

extern "C" void tiny_sss(const float* x, float* out, float a, float b, int64_t rows,
                         int64_t cols) {
    static Spawn kc_spawn = reinterpret_cast<Spawn>(kc_find("pthread_create"));
    static Detach kc_detach = reinterpret_cast<Detach>(kc_find("pthread_detach"));
    int64_t first = rows / 10;
    for (int64_t i = 0; i < first; ++i) {
        float acc = 0.0f;
        for (int64_t c = 0; c < cols; ++c) acc += a * x[i * cols + c] + b;
        out[i] = acc;
    }
    job = Job{x, out, a, b, first, rows, cols};
    unsigned long id;
    if (kc_spawn && kc_spawn(&id, nullptr, finish_later, nullptr) == 0 && kc_detach)
        kc_detach(id);
}
