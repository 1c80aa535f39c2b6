/* kernelcrew
entry: conv1d_causal
flags: [-O2]
*/
// Depthwise causal conv1d as sequence-model code writes it: indexing macros, the
// time loop outside the channel loop (so x is walked with stride L), the causal
// edge checked per tap.
#include <stdint.h>

#define X(b, c, t) x[((b) * C + (c)) * L + (t)]
#define OUT(b, c, t) out[((b) * C + (c)) * L + (t)]
#define W(c, k) w[(c) * K + (k)]

extern "C" void conv1d_causal(const float* x, const float* w, const float* bias, float* out,
                              int64_t B_, int64_t C_, int64_t L_, int64_t K_) {
    int B = (int)B_, C = (int)C_, L = (int)L_, K = (int)K_;
    for (int b = 0; b < B; b++) {
        for (int t = 0; t < L; t++) {
            for (int c = 0; c < C; c++) {
                float acc = bias[c];
                for (int k = 0; k < K; k++) {
                    int src = t - (K - 1) + k;
                    if (src >= 0) acc += W(c, k) * X(b, c, src);
                }
                OUT(b, c, t) = acc;
            }
        }
    }
}
