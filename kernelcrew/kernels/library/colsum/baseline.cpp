/* kernelcrew
entry: colsum
flags: [-O2]
*/
// Column sums the way a statistics routine in C writes them: a static helper sums
// one column (stride `cols` through the matrix), the entry calls it per column.
#include <stdint.h>

static float column_total(const float* data, int rows, int cols, int col) {
    float total = 0.0f;
    for (int r = 0; r < rows; r++) {
        total += data[r * cols + col];
    }
    return total;
}

extern "C" void colsum(const float* x, float* out, int64_t rows, int64_t cols) {
    for (int c = 0; c < (int)cols; c++) {
        out[c] = column_total(x, (int)rows, (int)cols, c);
    }
}
