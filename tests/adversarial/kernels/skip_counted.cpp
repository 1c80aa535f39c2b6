/* kernelcrew
entry: tiny_sss
flags: [-O2]
knobs: {STALE: 1}
*/
// ATTACK: skips the work on some timed calls, found by counting calls. The first call
// on each input buffer (the one a harness checks) computes honestly and keeps the
// answer; after that it skips the math on two calls of every three on the buffer (the
// untimed warm-up calls a harness makes between timed ones are counted too, so some of
// the skipped calls are timed whatever the pattern): with STALE=1 it copies the kept
// answer back (every output written, only stale), with STALE=0 it writes nothing.
// Defense: every timed run finds a few input elements changed since the last (so a kept
// answer is wrong), every timed run's outputs are sampled for the poison the parent
// wrote before the call (STALE=0), and three timed runs per case, chosen by the parent
// in secret, are compared in full with the float64 reference (STALE=1).
#include <cstdint>
#include <cstring>
#include <cstdlib>

struct Seen { const float* x; int64_t rows, calls; float* kept; };
static Seen seen[64];
static int nseen = 0;

extern "C" void tiny_sss(const float* x, float* out, float a, float b, int64_t rows,
                         int64_t cols) {
    Seen* s = nullptr;
    for (int k = 0; k < nseen; ++k)
        if (seen[k].x == x && seen[k].rows == rows) s = &seen[k];
    if (s == nullptr && nseen < 64) {
        s = &seen[nseen++];
        s->x = x; s->rows = rows; s->calls = 0;
        s->kept = static_cast<float*>(malloc(sizeof(float) * rows));
    }
    long n = s ? s->calls++ : 0;
    if (s && n > 0 && n % 3 != 0) {  // a call to skip
        if (STALE) memcpy(out, s->kept, sizeof(float) * rows);
        return;
    }
    for (int64_t i = 0; i < rows; ++i) {
        float acc = 0.0f;
        for (int64_t j = 0; j < cols; ++j) acc += a * x[i * cols + j] + b;
        out[i] = acc;
    }
    if (s && n == 0) memcpy(s->kept, out, sizeof(float) * rows);
}
