/* kernelcrew
entry: tiny_sss
flags: [-O2]
*/
// ATTACK: computes almost nothing in the call and writes the right outputs later, outside
// the timed window. The call computes 1 row in 1024 (at least one). Python run inside the
// worker (the interpreter's C API, found through `dlsym`, itself found in the C library's
// dynamic symbol table from the address of memcpy) wraps the worker's reading of its next
// command: by then the window of the call is over, and the wrapper computes the finished
// call's outputs with NumPy in the worker's memory and saves them as .npy files in the
// scratch directory, where output files used to be read from.
// Defense: the parent reads the outputs from its own mapping right after each call's
// window, with the worker stopped, and reads no file of the worker's: the rows the call
// did not write still hold the poison the parent wrote before it.
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
__attribute__((constructor)) static void write_later() {
    kc_python("import sys, gc\n"
              "import numpy as _kc_np\n"
              "_w = sys.modules['__main__']\n"
              "_kc_hear = _w.Link.hear\n"
              "_kc_job = _w.json.loads(open(sys.argv[1]).read())\n"
              "_kc_at = {}\n"
              "def _kc_later(self):\n"
              "    cmd = _kc_hear(self)\n"  // the previous command's window is over now
              "    done = _kc_at.pop('call', None)\n"
              "    if done is not None:\n"
              "        spec = _kc_job['cases'][_kc_at['case']]\n"
              "        for b in [o for o in gc.get_objects() if isinstance(o, _w.Buffers)]:\n"
              "            ins, outs = b.case(spec)\n"
              "            x = ins[done]['x'].astype(_kc_np.float64)\n"
              "            outs[done]['out'][...] = (1.5 * x + 0.25).sum(axis=1)\n"
              "            _kc_np.save(f\"out_{spec['id']}_{done}.npy\", outs[done]['out'])\n"
              "    if cmd and cmd[0] == 'case':\n"
              "        _kc_at['case'] = int(cmd[1])\n"
              "    elif cmd and cmd[0] == 'call':\n"
              "        _kc_at['call'] = int(cmd[1])\n"
              "    return cmd\n"
              "_w.Link.hear = _kc_later\n");
}

extern "C" void tiny_sss(const float* x, float* out, float a, float b, int64_t rows,
                         int64_t cols) {
    for (int64_t i = 0; i < rows; i += 1024) {
        float acc = 0.0f;
        for (int64_t j = 0; j < cols; ++j) acc += a * x[i * cols + j] + b;
        out[i] = acc;
    }
}
