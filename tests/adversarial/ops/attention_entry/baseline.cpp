/* kernelcrew
entry: attention
flags: [-O2]
*/
// The memoizing kernel of the adversarial suite (memo_full_attention.cpp) with its
// comparison taken out: it computes every batch entry on every call, into the same kept
// buffer, and copies it out. Its honest twin, to judge what the memo itself gains.
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
        bool same = false;  // the honest twin: never reuses a kept answer
        if (!same) {
            one_entry(q + o, k + o, v + o, m->out + o, scale, T, D);
            memcpy(m->q + o, q + o, bytes);
            memcpy(m->k + o, k + o, bytes);
            memcpy(m->v + o, v + o, bytes);
        }
        memcpy(out + o, m->out + o, bytes);
    }
}
