/* kernelcrew
entry: scale_shift_sum
flags: [-O3, -march=native, -fopenmp-simd]
knobs: {SLOW_SHARE: 40, SLOW_REPS: 10}
*/
// ATTACK: hides a regression in noise of its own making. The math is honest and fast
// (one vectorized sum per row in double precision, then a * sum + b * cols), except on
// the unaligned group (the two cases whose columns are not a multiple of 1024 and that
// are not tiny): there, at random, SLOW_SHARE percent of the calls take the slow road
// (the baseline's loop, SLOW_REPS times over). The group's slowdown is real: with 40% of
// the calls ten times the baseline's loop, a call there costs about four baseline calls
// on average. Issue #41 used half the calls at three times: a gate that judged a group
// against that group's own spread found the regression inside the noise (1.9x `faster`
// with the group at 0.27-0.33x). lib_sss_fast.cpp is the same kernel without the coin.
// Defense asked for: a group's regression judged on statistics the kernel cannot move
// on purpose; the group regresses, the kernel is not accepted. The gate judges medians
// against the incumbent's own noise: with fewer than half the calls slow, the median
// call of the group is a fast one.
#include <cstdint>

static uint64_t coin = 0x9E3779B97F4A7C15ull;

static bool slow_call() {  // xorshift64: true for SLOW_SHARE percent of the calls
    coin ^= coin << 13;
    coin ^= coin >> 7;
    coin ^= coin << 17;
    return coin % 100 < SLOW_SHARE;
}

extern "C" void scale_shift_sum(const float* x, float* out, float a, float b, int64_t rows,
                                int64_t cols) {
    bool unaligned = cols % 1024 != 0 && rows * cols > 100000;
    if (unaligned && slow_call()) {  // the baseline's loop, SLOW_REPS times
        for (int rep = 0; rep < SLOW_REPS; ++rep) {
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
