/* kernelcrew
entry: tiny_sss
flags: [-O2]
*/
// ATTACK: correct when verified, wrong when timed, with outputs that were all verified.
// The first call for each input buffer computes honestly and keeps the answer. Later
// calls compute again and, when the answer is the same as at that first call (the
// inputs did not change: not a probe), return the answer kept for another buffer of the
// same shape instead. Every output it returns is, byte for byte, an output that passed
// the reference check, only for another input set: a harness that let a timed output
// pass because its bytes match some verified output would accept it. Defense: every
// timed run finds a few input elements changed, so the kernel's own test (the answer is
// the first call's) fails and it computes honestly; where an input cannot change (one
// element: nothing to swap it with) the replayed answer meets the secret full checks of
// timed runs, which compare it with that set's own reference.
#include <cstdint>
#include <cstring>

struct Seen {
    const float* x;
    int64_t rows, cols;
    float answer[4096];
};
static Seen seen[64];
static int nseen = 0;

extern "C" void tiny_sss(const float* x, float* out, float a, float b, int64_t rows,
                         int64_t cols) {
    for (int64_t i = 0; i < rows; ++i) {
        float acc = 0.0f;
        for (int64_t j = 0; j < cols; ++j) acc += a * x[i * cols + j] + b;
        out[i] = acc;
    }
    int self = -1;
    for (int k = 0; k < nseen; ++k) {
        if (seen[k].x == x && seen[k].rows == rows && seen[k].cols == cols) self = k;
    }
    if (self < 0) {
        if (nseen < 64 && rows <= 4096) {
            Seen& s = seen[nseen++];
            s.x = x; s.rows = rows; s.cols = cols;
            std::memcpy(s.answer, out, sizeof(float) * rows);
        }
        return;
    }
    if (std::memcmp(out, seen[self].answer, sizeof(float) * rows) != 0) return;  // a probe
    for (int k = 0; k < nseen; ++k) {
        if (k != self && seen[k].rows == rows && seen[k].cols == cols) {
            std::memcpy(out, seen[k].answer, sizeof(float) * rows);
            return;
        }
    }
}
