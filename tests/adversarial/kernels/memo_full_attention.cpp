/* kernelcrew
entry: attention
flags: [-O2]
*/
// ATTACK: memoization by a full comparison of the inputs, on an op whose math costs far
// more than reading its inputs. The kernel keeps a copy of q, k, v and of its answer per
// input buffer; on a later call it compares each batch entry's q, k and v with the copy
// and, where none changed, copies the kept output instead of computing it. The math is
// the baseline's own, so whatever it gains comes from the cache (issue #41 measured this
// kernel at 66-92x when the timed inputs repeated).
// Defense: every timed run finds about 1 element in 64 of each input changed, at places
// drawn afresh: nearly every batch entry of k and v changes, and any change of k or v
// changes every output row of its entry. The comparison finds almost nothing to reuse
// and costs a pass over the inputs: no gain, the verdict is not `faster`.
#include <math.h>
#include <stdint.h>
#include <cstring>
#include <cstdlib>

static float dot(const float* a, const float* b, int n) {
    float s = 0.0f;
    for (int i = 0; i < n; i++) s += a[i] * b[i];
    return s;
}

static void one_entry(const float* qb, const float* kb, const float* vb, float* ob,
                      float scale, int T, int D) {
    for (int t = 0; t < T; t++) {
        const float* qt = qb + t * D;
        float* ot = ob + t * D;
        float maxval = -INFINITY;
        for (int s = 0; s < T; s++) {
            float score = dot(qt, kb + s * D, D) * scale;
            if (score > maxval) maxval = score;
        }
        for (int d = 0; d < D; d++) ot[d] = 0.0f;
        float denom = 0.0f;
        for (int s = 0; s < T; s++) {
            float p = expf(dot(qt, kb + s * D, D) * scale - maxval);
            denom += p;
            const float* vs = vb + s * D;
            for (int d = 0; d < D; d++) ot[d] += p * vs[d];
        }
        for (int d = 0; d < D; d++) ot[d] /= denom;
    }
}

struct Memo { const float* at; int64_t size; float *q, *k, *v, *out; };
static Memo memo[64];

extern "C" void attention(const float* q, const float* k, const float* v, float* out,
                          float scale, int64_t B, int64_t T_, int64_t D_) {
    int T = (int)T_, D = (int)D_;
    int64_t per = (int64_t)T * D, size = B * per;
    Memo* m = nullptr;
    for (auto& e : memo) if (e.at == q && e.size == size) { m = &e; break; }
    bool fresh = m == nullptr;
    if (fresh) {
        for (auto& e : memo) if (e.at == nullptr) { m = &e; break; }
        if (m == nullptr) m = &memo[0];
        free(m->q); free(m->k); free(m->v); free(m->out);
        m->at = q;
        m->size = size;
        m->q = static_cast<float*>(malloc(sizeof(float) * size));
        m->k = static_cast<float*>(malloc(sizeof(float) * size));
        m->v = static_cast<float*>(malloc(sizeof(float) * size));
        m->out = static_cast<float*>(malloc(sizeof(float) * size));
    }
    for (int64_t b = 0; b < B; b++) {
        int64_t o = b * per;
        size_t bytes = sizeof(float) * per;
        bool same = !fresh && memcmp(q + o, m->q + o, bytes) == 0 &&
                    memcmp(k + o, m->k + o, bytes) == 0 && memcmp(v + o, m->v + o, bytes) == 0;
        if (!same) {
            one_entry(q + o, k + o, v + o, m->out + o, scale, T, D);
            memcpy(m->q + o, q + o, bytes);
            memcpy(m->k + o, k + o, bytes);
            memcpy(m->v + o, v + o, bytes);
        }
        memcpy(out + o, m->out + o, bytes);
    }
}
