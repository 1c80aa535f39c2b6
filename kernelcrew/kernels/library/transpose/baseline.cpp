/* kernelcrew
entry: transpose
flags: [-O2]
*/
#include <cstdint>

// Naive CPU baseline: rows outer, columns inner; reads of x are contiguous,
// writes to y are strided by `rows` elements.
extern "C" void transpose(const float* x, float* y, int64_t rows, int64_t cols) {
    for (int64_t i = 0; i < rows; ++i) {
        for (int64_t j = 0; j < cols; ++j) {
            y[j * rows + i] = x[i * cols + j];
        }
    }
}
