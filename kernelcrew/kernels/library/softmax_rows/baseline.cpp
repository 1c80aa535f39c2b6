/* kernelcrew
entry: softmax_rows
flags: [-O2]
*/
#include <cmath>
#include <cstdint>

// Naive CPU baseline: numerically stable softmax of every row in three passes
// (row max; exp and running sum, stored in y; divide by the sum).
extern "C" void softmax_rows(const float* x, float* y, int64_t rows, int64_t cols) {
    for (int64_t i = 0; i < rows; ++i) {
        const float* xr = x + i * cols;
        float* yr = y + i * cols;
        float mx = xr[0];
        for (int64_t j = 1; j < cols; ++j) {
            if (xr[j] > mx) mx = xr[j];
        }
        float sum = 0.0f;
        for (int64_t j = 0; j < cols; ++j) {
            float e = std::exp(xr[j] - mx);
            yr[j] = e;
            sum += e;
        }
        for (int64_t j = 0; j < cols; ++j) {
            yr[j] = yr[j] / sum;
        }
    }
}
