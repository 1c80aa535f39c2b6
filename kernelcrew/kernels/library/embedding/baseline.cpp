/* kernelcrew
entry: embedding
flags: [-O2]
*/
// Encoder forward of a GPT-style model in C: for every (b, t) a pointer to the output
// row, to the token's row of wte and to the position's row of wpe; `int` counters.
#include <stdint.h>

extern "C" void embedding(int* inp, float* wte, float* wpe, float* out, int64_t B_,
                          int64_t T_, int64_t C_, int64_t V_) {
    int B = (int)B_, T = (int)T_, C = (int)C_;
    (void)V_;
    for (int b = 0; b < B; b++) {
        for (int t = 0; t < T; t++) {
            float* out_bt = out + (int64_t)b * T * C + (int64_t)t * C;
            int ix = inp[b * T + t];
            float* wte_ix = wte + (int64_t)ix * C;
            float* wpe_t = wpe + (int64_t)t * C;
            for (int i = 0; i < C; i++) {
                out_bt[i] = wte_ix[i] + wpe_t[i];
            }
        }
    }
}
