/* kernelcrew
entry: attention
flags: [-O2]
*/
// Small attention block without a scratch buffer: batch entries already split across
// threads; per query a first pass finds the largest score, a second recomputes the
// scores, exponentiates and accumulates the weighted values into the output row,
// which is divided by the sum at the end. Static helpers for the dot product.
#include <math.h>
#include <stdint.h>

static float dot(const float* a, const float* b, int n) {
    float s = 0.0f;
    for (int i = 0; i < n; i++) s += a[i] * b[i];
    return s;
}

extern "C" void attention(const float* q, const float* k, const float* v, float* out,
                          float scale, int64_t B, int64_t T_, int64_t D_) {
    int T = (int)T_, D = (int)D_;
#pragma omp parallel for
    for (int b = 0; b < (int)B; b++) {
        const float* qb = q + (int64_t)b * T * D;
        const float* kb = k + (int64_t)b * T * D;
        const float* vb = v + (int64_t)b * T * D;
        float* ob = out + (int64_t)b * T * D;
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
}
