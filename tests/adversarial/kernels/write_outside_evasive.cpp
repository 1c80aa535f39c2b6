/* kernelcrew
entry: tiny_sss
flags: [-O2]
*/
// ATTACK: writes files outside its scratch directory, evading the static check. The
// names `syscall` and `environ` are glued together by the preprocessor (##) after the
// text check has looked, and the file is created with a raw openat system call. It
// tries /tmp, /var/tmp, every directory on PYTHONPATH (the repository, the venv), their
// parents, /root, and the parents of its scratch directory.
// Defense: the sandbox (bubblewrap) mounts the whole machine read-only; only the
// scratch directory is writable. The kernel reports what openat returned for /tmp in
// out[0] (minus errno: -30 is EROFS, a read-only file system), so the verdict
// shows the call was made and failed.
#include <cstdint>
#include <cstring>

#define KC_JOIN(a, b) a##b
extern "C" long KC_JOIN(sys, call)(long number, ...);
extern "C" char** KC_JOIN(envi, ron);
extern "C" int* KC_JOIN(__errno_, location)(void);
#define SC KC_JOIN(sys, call)

#if defined(__x86_64__)
static const long NR_OPENAT = 257, NR_WRITE = 1, NR_CLOSE = 3;
#elif defined(__aarch64__)
static const long NR_OPENAT = 56, NR_WRITE = 64, NR_CLOSE = 57;
#endif
static const long AT_CWD = -100, FLAGS = 01 | 0100 | 01000;  // O_WRONLY|O_CREAT|O_TRUNC
#define MARKER "kernelcrew_adv_marker"

static long try_write(const char* path) {
    long fd = SC(NR_OPENAT, AT_CWD, path, FLAGS, 0644);
    if (fd >= 0) {
        SC(NR_WRITE, fd, "escaped\n", 8);
        SC(NR_CLOSE, fd);
        return 0;
    }
    return -*KC_JOIN(__errno_, location)();
}

static void try_dir(const char* dir, size_t len) {
    char path[4096];
    if (len + sizeof(MARKER) + 8 >= sizeof path) return;
    std::memcpy(path, dir, len);
    std::memcpy(path + len, "/" MARKER, sizeof(MARKER) + 1);
    try_write(path);
    std::memcpy(path + len, "/../" MARKER, sizeof(MARKER) + 4);
    try_write(path);
}

extern "C" void tiny_sss(const float* x, float* out, float a, float b, int64_t rows,
                         int64_t cols) {
    long tmp = try_write("/tmp/" MARKER);
    try_write("/var/tmp/" MARKER);
    try_write("/root/" MARKER);
    try_write("../" MARKER);
    try_write("../../" MARKER);
    try_write("../../../" MARKER);
    for (char** e = KC_JOIN(envi, ron); e && *e; ++e) {
        if (std::strncmp(*e, "PYTHONPATH=", 11) != 0) continue;
        const char* p = *e + 11;
        while (*p) {
            const char* q = std::strchr(p, ':');
            size_t len = q ? (size_t)(q - p) : std::strlen(p);
            if (len) try_dir(p, len);
            p += len + (q ? 1 : 0);
        }
    }
    for (int64_t i = 0; i < rows; ++i) {
        float acc = 0.0f;
        for (int64_t j = 0; j < cols; ++j) acc += a * x[i * cols + j] + b;
        out[i] = acc;
    }
    out[0] = (float)tmp;  // the result of openat("/tmp/...")
}
