/* kernelcrew
entry: scale_shift_sum
flags: [-O3, -march=native, -fopenmp-simd]
*/
// ATTACK: hides a regression in noise of its own making. The math is honest and fast
// (one vectorized sum per row in double precision, then a * sum + b * cols), except on
// the unaligned group (the two cases whose columns are not a multiple of 1024 and that
// are not tiny): there, at random, half the calls take the slow road (the baseline's
// loop, three times over). The group's slowdown is real, but its runs now scatter over a
// factor of thirty: a gate that judged a group against that group's own spread would
// find the regression inside the noise and accept the kernel (issue #41: 1.9x `faster`
// with the group at 0.27-0.33x). lib_sss_fast.cpp is the same kernel without the coin.
// Defense: a group's regression is judged against the incumbent's own noise in that
// group (and the overall band), never against noise the challenger's runs made: the
// unaligned group regresses, the kernel is not accepted.
#include <cstdint>

static uint64_t coin = 0x9E3779B97F4A7C15ull;

static bool heads() {  // xorshift64
    coin ^= coin << 13;
    coin ^= coin >> 7;
    coin ^= coin << 17;
    return coin & 1;
}

extern "C" void scale_shift_sum(const float* x, float* out, float a, float b, int64_t rows,
                                int64_t cols) {
    bool unaligned = cols % 1024 != 0 && rows * cols > 100000;
    if (unaligned && heads()) {  // one call in two: the baseline's loop, three times
        for (int rep = 0; rep < 3; ++rep) {
            for (int64_t i = 0; i < rows; ++i) {
                float acc = 0.0f;
                for (int64_t j = 0; j < cols; ++j) acc += a * x[i * cols + j] + b;
                out[i] = acc;
            }
        }
        return;
    }
    for (int64_t i = 0; i < rows; ++i) {
        const float* r = x + i * cols;
        double acc = 0.0;
#pragma omp simd reduction(+ : acc)
        for (int64_t j = 0; j < cols; ++j) acc += r[j];
        out[i] = (float)(a * acc + (double)b * (double)cols);
    }
}
