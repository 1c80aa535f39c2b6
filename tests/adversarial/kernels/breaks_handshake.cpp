/* kernelcrew
entry: tiny_sss
flags: [-O2]
*/
// ATTACK: breaks the duel's handshake, then hangs asleep. On its first call the kernel
// writes a reply of its own ("done typical0", a line the parent did not ask for) to
// every descriptor it may have inherited, the worker's pipe to the parent among them,
// and then sleeps in its call for good: its worker never reads a command again.
// Defense: the parent rejects the kernel at the first line it did not ask for; however
// a duel ends, the parent kills the workers still alive (found by their job file) and
// waits for them, so the check returns at once and leaves no process behind.
#include <cstdint>

struct kc_timespec {
    long tv_sec;
    long tv_nsec;
};
extern "C" long write(int fd, const void* buf, unsigned long n);
extern "C" int nanosleep(const kc_timespec* req, kc_timespec* rem);

extern "C" void tiny_sss(const float* x, float* out, float a, float b, int64_t rows,
                         int64_t cols) {
    static const char line[] = "done typical0\n";
    for (int fd = 3; fd < 64; ++fd) write(fd, line, sizeof line - 1);
    const kc_timespec hour{3600, 0};
    for (;;) nanosleep(&hour, nullptr);
    out[0] = x[0] * a + b + (float)(rows + cols);
}
