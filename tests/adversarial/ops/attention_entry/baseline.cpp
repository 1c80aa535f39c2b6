/* kernelcrew
entry: attention
flags: [-O2]
*/
// The library's attention, one batch entry at a time through a helper: the honest
// twin of the memoizing kernel of the adversarial suite.
#include <math.h>
#include <stdint.h>

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

extern "C" void attention(const float* q, const float* k, const float* v, float* out,
                          float scale, int64_t B, int64_t T_, int64_t D_) {
    int T = (int)T_, D = (int)D_;
    int64_t per = (int64_t)T * D;
    for (int64_t b = 0; b < B; b++) one_entry(q + b * per, k + b * per, v + b * per,
                                              out + b * per, scale, T, D);
}
