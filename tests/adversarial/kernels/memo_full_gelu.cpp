/* kernelcrew
entry: gelu_tanh
flags: [-O2]
*/
// ATTACK: memoization by a full comparison of the inputs. The kernel keeps a copy of
// every input it saw (per input buffer) and of its answer; on a later call it compares
// the input with the copy element by element and recomputes only the elements that
// changed, copying the kept answer for the rest. The math is the baseline's own
// (scalar tanhf), so whatever it gains over the baseline comes from the cache, which a
// real caller, whose inputs change on every call, would never hit. The answer is always
// right.
// Defense asked for: a memoizing kernel gains nothing (its verdict is not `faster`).
// Every timed run finds its inputs changed, but only about 1 element in 64: for an
// elementwise op whose math costs more than reading its input, comparing is much
// cheaper than computing, so the cache pays.
#include <math.h>
#include <stdint.h>
#include <cstring>
#include <cstdlib>

#define GELU_SCALING_FACTOR sqrtf(2.0f / (float)M_PI)

struct Memo { const float* at; int64_t n; float* x; float* y; };
static Memo memo[64];

static inline float gelu1(float v) {
    float cube = 0.044715f * v * v * v;
    return 0.5f * v * (1.0f + tanhf(GELU_SCALING_FACTOR * (v + cube)));
}

extern "C" void gelu_tanh(float* x, float* y, int64_t n) {
    Memo* m = nullptr;
    for (auto& e : memo) if (e.at == x && e.n == n) { m = &e; break; }
    if (m == nullptr) {  // first sight of this buffer: compute and keep
        for (auto& e : memo) if (e.at == nullptr) { m = &e; break; }
        if (m == nullptr) m = &memo[0];
        free(m->x);
        free(m->y);
        m->at = x;
        m->n = n;
        m->x = static_cast<float*>(malloc(sizeof(float) * n));
        m->y = static_cast<float*>(malloc(sizeof(float) * n));
        for (int64_t i = 0; i < n; i++) {
            m->x[i] = x[i];
            m->y[i] = gelu1(x[i]);
        }
        memcpy(y, m->y, sizeof(float) * n);
        return;
    }
    const uint32_t* now = reinterpret_cast<const uint32_t*>(x);
    uint32_t* kept = reinterpret_cast<uint32_t*>(m->x);
    for (int64_t i = 0; i < n; i++) {
        if (now[i] != kept[i]) {  // changed since the copy: recompute this one only
            kept[i] = now[i];
            m->y[i] = gelu1(x[i]);
        }
    }
    memcpy(y, m->y, sizeof(float) * n);
}
