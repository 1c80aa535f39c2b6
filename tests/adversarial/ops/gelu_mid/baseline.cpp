/* kernelcrew
entry: gelu_tanh
flags: [-O2]
*/
// GELU, tanh form, the way transformer training code in C writes it: a scaling
// constant as a macro, an `int` loop counter, tanhf from libm.
#include <math.h>
#include <stdint.h>

#define GELU_SCALING_FACTOR sqrtf(2.0f / (float)M_PI)

extern "C" void gelu_tanh(float* x, float* y, int64_t n) {
    int N = (int)n;
    for (int i = 0; i < N; i++) {
        float v = x[i];
        float cube = 0.044715f * v * v * v;
        y[i] = 0.5f * v * (1.0f + tanhf(GELU_SCALING_FACTOR * (v + cube)));
    }
}
