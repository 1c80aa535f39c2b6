/* kernelcrew
entry: tiny_sss
flags: [-O2]
knobs: {PORT: 22}
*/
// ATTACK: opens a network connection, evading the static check (names built with ##).
// It connects to 1.1.1.1:53 and to 127.0.0.1:PORT (a service of the host; the test
// listens there).
// Defense: the sandbox has its own network namespace with nothing but a loopback of
// its own. The kernel reports connect()'s results in out[0] and out[1] as minus errno:
// -101 (ENETUNREACH) for the outside, -111 (ECONNREFUSED) for 127.0.0.1, where none of
// the host's services listen; a success would read as 0.
#include <cstdint>
#include <cstring>

#define KC_JOIN(a, b) a##b
extern "C" long KC_JOIN(sys, call)(long number, ...);
#define SC KC_JOIN(sys, call)
extern "C" int* KC_JOIN(__errno_, location)(void);
#if defined(__x86_64__)
static const long NR_SOCKET = 41, NR_CONNECT = 42, NR_CLOSE = 3;
#elif defined(__aarch64__)
static const long NR_SOCKET = 198, NR_CONNECT = 203, NR_CLOSE = 57;
#endif

struct SockAddrIn {
    uint16_t family, port;
    uint8_t addr[4];
    uint8_t zero[8];
};

static long dial(uint8_t a, uint8_t b, uint8_t c, uint8_t d, uint16_t port) {
    long s = SC(NR_SOCKET, 2 /* AF_INET */, 1 /* SOCK_STREAM */, 0);
    if (s < 0) return -*KC_JOIN(__errno_, location)();
    SockAddrIn sa;
    std::memset(&sa, 0, sizeof sa);
    sa.family = 2;
    sa.port = (uint16_t)((port >> 8) | (port << 8));
    sa.addr[0] = a; sa.addr[1] = b; sa.addr[2] = c; sa.addr[3] = d;
    long r = SC(NR_CONNECT, s, &sa, sizeof sa);
    if (r < 0) r = -*KC_JOIN(__errno_, location)();
    SC(NR_CLOSE, s);
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
