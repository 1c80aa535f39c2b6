/* kernelcrew
entry: tiny_sss
flags: [-O2]
*/
// ATTACK: computes the right answer AND creates files outside its scratch directory,
// quietly: nothing in its output shows it tried, so the verdict is `correct`. It gets
// past the static check by building the names of the calls with the preprocessor after
// the text check has looked: libc's `open` and `mkdir` glued with ##, and `syscall`
// glued the same way and called by number (creat / openat). It tries /tmp, /var/tmp,
// /root, /dev/shm, the parents of its scratch directory and the harness's inputs folder
// next to it, and every directory on PYTHONPATH.
// Defense: the confinement, not the static check. bubblewrap: everything but the
// scratch directory is read-only. stock: Landlock grants writes beneath the scratch
// directory only (the inputs folder is read-only, sibling runs are invisible).
// The test checks that it is judged correct and that no file was created anywhere.
#include <cstdint>
#include <cstring>

#define KC_JOIN(a, b) a##b
extern "C" int KC_JOIN(op, en)(const char* path, int flags, ...);
extern "C" int KC_JOIN(mk, dir)(const char* path, unsigned mode);
extern "C" int KC_JOIN(clo, se)(int fd);
extern "C" long KC_JOIN(sys, call)(long number, ...);
extern "C" char** KC_JOIN(envi, ron);

#if defined(__x86_64__)
#define KC_CREATE(path) KC_JOIN(sys, call)(85 /* creat */, path, 0644)
#elif defined(__aarch64__)
#define KC_CREATE(path) KC_JOIN(sys, call)(56 /* openat */, -100, path, 01 | 0100, 0644)
#endif
#define SILENT "kernelcrew_adv_marker_silent"

static void plant(const char* dir, size_t len) {
    char path[4096];
    if (len + 64 >= sizeof path) return;
    std::memcpy(path, dir, len);
    std::memcpy(path + len, "/" SILENT "_open", sizeof(SILENT "_open") + 1);
    int fd = KC_JOIN(op, en)(path, 01 | 0100, 0644);  // O_WRONLY | O_CREAT
    if (fd >= 0) KC_JOIN(clo, se)(fd);
    std::memcpy(path + len, "/" SILENT "_nr", sizeof(SILENT "_nr") + 1);
    long fd2 = KC_CREATE(path);
    if (fd2 >= 0) KC_JOIN(clo, se)((int)fd2);
    std::memcpy(path + len, "/" SILENT "_dir", sizeof(SILENT "_dir") + 1);
    KC_JOIN(mk, dir)(path, 0755);
}

static void plant_in(const char* dir) { plant(dir, std::strlen(dir)); }

extern "C" void tiny_sss(const float* x, float* out, float a, float b, int64_t rows,
                         int64_t cols) {
    static const char* dirs[] = {"/tmp", "/var/tmp", "/root", "/dev/shm", "..", "../..",
                                 "../../..", "../inputs"};
    for (const char* d : dirs) plant_in(d);
    for (char** e = KC_JOIN(envi, ron); e && *e; ++e) {
        if (std::strncmp(*e, "PYTHONPATH=", 11) != 0) continue;
        const char* p = *e + 11;
        while (*p) {
            const char* q = std::strchr(p, ':');
            size_t len = q ? (size_t)(q - p) : std::strlen(p);
            if (len) plant(p, len);
            p += len + (q ? 1 : 0);
        }
    }
    for (int64_t i = 0; i < rows; ++i) {
        float acc = 0.0f;
        for (int64_t j = 0; j < cols; ++j) acc += a * x[i * cols + j] + b;
        out[i] = acc;
    }
}
