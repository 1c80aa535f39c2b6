/* kernelcrew
entry: matvec_t
flags: [-O2]
*/
#include <cstdint>

// Naive CPU baseline: one dot product per output, down a column of a (stride n).
extern "C" void matvec_t(const float* a, const float* x, float* y, int64_t m, int64_t n) {
    for (int64_t j = 0; j < n; ++j) {
        float acc = 0.0f;
        for (int64_t i = 0; i < m; ++i) {
            acc += a[i * n + j] * x[i];
        }
        y[j] = acc;
    }
}
