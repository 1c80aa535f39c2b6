/* kernelcrew
entry: rmsnorm
flags: [-O2]
*/
#include <cmath>
#include <cstdint>

// Naive CPU baseline: per row, a float sum of squares, then one scaling pass
// y = x * (1 / sqrt(mean(x^2) + eps)) * w.
extern "C" void rmsnorm(const float* x, const float* w, float* y, float eps,
                        int64_t rows, int64_t cols) {
    for (int64_t i = 0; i < rows; ++i) {
        const float* xr = x + i * cols;
        float* yr = y + i * cols;
        float ss = 0.0f;
        for (int64_t j = 0; j < cols; ++j) {
            ss += xr[j] * xr[j];
        }
        float inv = 1.0f / std::sqrt(ss / (float)cols + eps);
        for (int64_t j = 0; j < cols; ++j) {
            yr[j] = xr[j] * inv * w[j];
        }
    }
}
