/* kernelcrew
entry: tiny_sss
flags: [-O2]
*/
// ATTACK: forges its own timings. The kernel computes honestly, but a destructor that
// runs when the worker process exits rewrites the worker's progress report (a file in
// the scratch directory, the only place it may write) so that every timed call reads
// 0.000001 ms. File calls are built with ## to get past the static check.
// Defense (partial, and this test pins what holds): a kernel running inside the worker
// process can rewrite anything the worker reports, so timings are only as honest as
// the static check keeps kernels from system calls. What still holds: the roofline
// quarantine. A time under the op's bytes/peak-bandwidth or flops/peak-rate floor is
// marked `suspicious` and its `faster` verdict is not accepted.
#include <cstdint>
#include <cstring>

#define KC_JOIN(a, b) a##b
extern "C" long KC_JOIN(sys, call)(long number, ...);
#define SC KC_JOIN(sys, call)
#if defined(__x86_64__)
static const long NR_READ = 0, NR_WRITE = 1, NR_OPENAT = 257, NR_CLOSE = 3;
#elif defined(__aarch64__)
static const long NR_READ = 63, NR_WRITE = 64, NR_OPENAT = 56, NR_CLOSE = 57;
#endif

static char in[1 << 20], out[1 << 20];

__attribute__((destructor)) static void forge() {
    long fd = SC(NR_OPENAT, -100, "progress.jsonl", 0, 0);
    if (fd < 0) return;
    long n = 0, r;
    while ((r = SC(NR_READ, fd, in + n, sizeof in - 1 - n)) > 0) n += r;
    SC(NR_CLOSE, fd);
    in[n] = 0;
    const char* key = "\"times_ms\": [";
    long o = 0;
    for (long i = 0; i < n;) {
        if (std::strncmp(in + i, key, std::strlen(key)) == 0) {
            std::memcpy(out + o, key, std::strlen(key));
            o += std::strlen(key);
            i += std::strlen(key);
            bool empty = in[i] == ']';
            while (i < n && in[i] != ']') ++i;
            if (!empty) {
                const char* fake = "1e-06, 1e-06, 1e-06";
                std::memcpy(out + o, fake, std::strlen(fake));
                o += std::strlen(fake);
            }
        } else {
            out[o++] = in[i++];
        }
    }
    fd = SC(NR_OPENAT, -100, "progress.jsonl", 01 | 01000, 0);  // O_WRONLY|O_TRUNC
    if (fd < 0) return;
    SC(NR_WRITE, fd, out, o);
    SC(NR_CLOSE, fd);
}

extern "C" void tiny_sss(const float* x, float* out_, float a, float b, int64_t rows,
                         int64_t cols) {
    for (int64_t i = 0; i < rows; ++i) {
        float acc = 0.0f;
        for (int64_t j = 0; j < cols; ++j) acc += a * x[i * cols + j] + b;
        out_[i] = acc;
    }
}
