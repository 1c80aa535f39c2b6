/* A dense layer's forward pass as inference code writes it: one weight row per output,
   a single float accumulator over the whole input, the rows split across threads. */
#include <stddef.h>

void dense_forward(float* out, float* in, float* weights, int n_in, int n_out) {
    int r;
#pragma omp parallel for private(r)
    for (r = 0; r < n_out; r++) {
        float acc = 0.0f;
        for (int k = 0; k < n_in; k++) {
            acc += weights[r * n_in + k] * in[k];
        }
        out[r] = acc;
    }
}
