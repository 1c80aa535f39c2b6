/* kernelcrew
entry: cumsum_rows
flags: [-O2]
*/
// Row prefix sums written with pointer increments: a read pointer and a write
// pointer walk each row, the running sum carried from one element to the next.
#include <stddef.h>
#include <stdint.h>

extern "C" void cumsum_rows(const float* x, float* y, int64_t rows, int64_t cols) {
    const float* src = x;
    float* dst = y;
    for (size_t r = 0; r < (size_t)rows; ++r) {
        float running = 0.0f;
        for (size_t c = 0; c < (size_t)cols; ++c) {
            running += *src++;
            *dst++ = running;
        }
    }
}
