/* Fixed-point quantisation with a float bit trick: promotion to float64 changes what
 * this code computes (the cast truncates, the union reads a float's bits). */
#include <stdint.h>
#include <float.h>
#include <math.h>

typedef union { float f; uint32_t u; } fbits;

static int to_level(float x, float scale) {
    return (int)(x * scale);
}

void quantize(float* out, const float* inp, int n) {
    for (int i = 0; i < n; i++) {
        fbits b;
        b.f = inp[i];
        b.u &= 0xfffff000u;
        float lim = fminf(b.f, FLT_MAX);
        out[i] = (float)to_level(lim, 16.0f) / 16.0f;
    }
}
