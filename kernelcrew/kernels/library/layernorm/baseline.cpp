/* kernelcrew
entry: layernorm
flags: [-O2]
*/
// Layer norm forward as C training code writes it: `int` counters, a pointer to
// each row, three passes per row (mean, variance, normalize), pointers neither
// const nor restrict, mean and rstd kept for the backward pass.
#include <math.h>
#include <stdint.h>

extern "C" void layernorm(float* inp, float* weight, float* bias, float* out, float* mean,
                          float* rstd, int64_t B_, int64_t T_, int64_t C_) {
    int B = (int)B_, T = (int)T_, C = (int)C_;
    float eps = 1e-5f;
    for (int b = 0; b < B; b++) {
        for (int t = 0; t < T; t++) {
            float* x = inp + (int64_t)b * T * C + (int64_t)t * C;
            float m = 0.0f;
            for (int i = 0; i < C; i++) {
                m += x[i];
            }
            m = m / C;
            float v = 0.0f;
            for (int i = 0; i < C; i++) {
                float xshift = x[i] - m;
                v += xshift * xshift;
            }
            v = v / C;
            float s = 1.0f / sqrtf(v + eps);
            float* out_bt = out + (int64_t)b * T * C + (int64_t)t * C;
            for (int i = 0; i < C; i++) {
                float n = (s * (x[i] - m));
                out_bt[i] = n * weight[i] + bias[i];
            }
            mean[b * T + t] = m;
            rstd[b * T + t] = s;
        }
    }
}
