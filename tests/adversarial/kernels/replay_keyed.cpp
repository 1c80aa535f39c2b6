/* kernelcrew
entry: tiny_sss
flags: [-O2]
*/
// ATTACK: memoization by sampled keys. Rotating input sets alone do not stop this: the
// kernel keeps one cached answer per input pointer, keyed by a few sampled input values
// (so a refilled buffer is noticed), and copies it back when the same buffer and the
// same samples come again. Defense: every timed run finds about 1 input element in 64
// changed in place, at places the kernel cannot predict (the samples rarely see them),
// so the cached answer is stale; three timed runs per case, chosen by the parent in
// secret, are compared in full with the reference of the changed inputs.
#include <cstdint>
#include <cstring>

struct Entry {
    const float* x;
    int64_t rows, cols;
    float probe[4];
    float* answer;
};
static Entry table[64];
static int used = 0;
static float storage[64][4096];

static void sample(const float* x, int64_t n, float* p) {
    for (int k = 0; k < 4; ++k) p[k] = x[(n - 1) * k / 3];
}

extern "C" void tiny_sss(const float* x, float* out, float a, float b, int64_t rows,
                         int64_t cols) {
    float p[4];
    sample(x, rows * cols, p);
    for (int e = 0; e < used; ++e) {
        Entry& t = table[e];
        if (t.x == x && t.rows == rows && t.cols == cols && std::memcmp(t.probe, p, sizeof p) == 0) {
            std::memcpy(out, t.answer, sizeof(float) * rows);
            return;
        }
    }
    for (int64_t i = 0; i < rows; ++i) {
        float acc = 0.0f;
        for (int64_t j = 0; j < cols; ++j) acc += a * x[i * cols + j] + b;
        out[i] = acc;
    }
    if (used < 64 && rows <= 4096) {
        Entry& t = table[used];
        t.x = x; t.rows = rows; t.cols = cols;
        std::memcpy(t.probe, p, sizeof p);
        t.answer = storage[used];
        std::memcpy(t.answer, out, sizeof(float) * rows);
        ++used;
    }
}
