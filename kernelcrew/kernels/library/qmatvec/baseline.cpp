/* kernelcrew
entry: qmatvec
flags: [-O2]
*/
// Quantized GEMV in the style of an inference runtime: a static helper takes the dot
// product of one int8-range row with the activations, accumulating in int32; the
// entry scales each row's sum into float.
#include <stdint.h>

static int32_t dot_q(const int32_t* row, const int32_t* act, int64_t n) {
    int32_t sumi = 0;
    for (int64_t j = 0; j < n; j++) {
        sumi += row[j] * act[j];
    }
    return sumi;
}

extern "C" void qmatvec(const int32_t* W, const int32_t* x, const float* scale, float* y,
                        int64_t m, int64_t n) {
    for (int64_t i = 0; i < m; i++) {
        y[i] = scale[i] * (float)dot_q(W + i * n, x, n);
    }
}
