/* kernelcrew
entry: tiny_sss
flags: [-O2]
*/
// ATTACK: returns before the work is done: the call starts a thread that computes the
// rows and returns at once (pthread_create is refused by the static text check, so the
// name is glued with ##). Defense (this file: the first layer): after compiling, the
// library's undefined dynamic symbols must be on the allow-list; `pthread_create`
// (thread creation outside OpenMP) is not, and the kernel is refused before it runs,
// with the symbol named. async_thread.cpp finds pthread_create without importing it and
// meets the runtime layers instead.
#include <cstdint>

#define KC_JOIN(a, b) a##b
extern "C" int KC_JOIN(pthread_, create)(unsigned long* id, const void* attr,
                                         void* (*fn)(void*), void* arg);
extern "C" int KC_JOIN(pthread_, join)(unsigned long id, void** ret);

struct Job {
    const float* x;
    float* out;
    float a, b;
    int64_t rows, cols;
};
static Job job;
static unsigned long pending = 0;  // the previous call's thread, joined by the next call

static void* work(void*) {
    Job j = job;
    volatile double slow = 0;
    for (int k = 0; k < 200000; ++k) slow = slow + 1.0;  // the caller has moved on by now
    for (int64_t i = 0; i < j.rows; ++i) {
        float acc = 0.0f;
        for (int64_t c = 0; c < j.cols; ++c) acc += j.a * j.x[i * j.cols + c] + j.b;
        j.out[i] = acc;
    }
    return nullptr;
}

extern "C" void tiny_sss(const float* x, float* out, float a, float b, int64_t rows,
                         int64_t cols) {
    if (pending) KC_JOIN(pthread_, join)(pending, nullptr);
    pending = 0;
    job = Job{x, out, a, b, rows, cols};
    unsigned long id;
    if (KC_JOIN(pthread_, create)(&id, nullptr, work, nullptr) == 0) pending = id;
}
