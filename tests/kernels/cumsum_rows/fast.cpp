/* kernelcrew
entry: cumsum_rows
flags: [-O3, -march=native, -fopenmp]
*/
// Hand-optimized CPU version: each row scanned eight elements at a time with an
// in-register prefix sum (three shift-and-add steps, GCC vector extensions), so the
// dependence from one element to the next becomes one add per eight; rows split across
// OpenMP threads, and a few long rows split into blocks scanned in parallel, then
// offset by the running totals of the blocks before them (two passes).
#include <cstdint>
#include <cstring>

namespace {

typedef float v8 __attribute__((vector_size(32)));
typedef int32_t v8i __attribute__((vector_size(32)));

inline v8 load8(const float* p) {
    v8 v;
    std::memcpy(&v, p, sizeof v);
    return v;
}

inline void store8(float* p, v8 v) { std::memcpy(p, &v, sizeof v); }

// inclusive scan of x[0, n) into y, starting from `carry`; returns the final total
inline float scan(const float* __restrict__ x, float* __restrict__ y, int64_t n, float carry) {
    const v8 zero = {0, 0, 0, 0, 0, 0, 0, 0};
    const v8i s1 = {8, 0, 1, 2, 3, 4, 5, 6};
    const v8i s2 = {8, 9, 0, 1, 2, 3, 4, 5};
    const v8i s4 = {8, 9, 10, 11, 0, 1, 2, 3};
    const v8i last = {7, 7, 7, 7, 7, 7, 7, 7};
    // the running total kept broadcast in a vector: the chain from one block to the next
    // is one add and one lane broadcast
    v8 run = {carry, carry, carry, carry, carry, carry, carry, carry};
    int64_t j = 0;
    for (; j + 8 <= n; j += 8) {
        v8 v = load8(x + j);
        v += __builtin_shuffle(v, zero, s1);
        v += __builtin_shuffle(v, zero, s2);
        v += __builtin_shuffle(v, zero, s4);
        v += run;
        store8(y + j, v);
        run = __builtin_shuffle(v, last);
    }
    carry = run[0];
    for (; j < n; ++j) {
        carry += x[j];
        y[j] = carry;
    }
    return carry;
}

}  // namespace

extern "C" void cumsum_rows(const float* __restrict__ x, float* __restrict__ y, int64_t rows,
                            int64_t cols) {
    if (rows * cols < (int64_t)1 << 21) {  // under ~1 ms of work: stay on this thread
        for (int64_t r = 0; r < rows; ++r) scan(x + r * cols, y + r * cols, cols, 0.0f);
        return;
    }
    if (rows >= 16) {
#pragma omp parallel for schedule(static)
        for (int64_t r = 0; r < rows; ++r) scan(x + r * cols, y + r * cols, cols, 0.0f);
        return;
    }
    // few long rows: blocks of a row scanned in parallel, then offset (two passes)
    const int64_t BLOCKS = 64;
    float total[BLOCKS];
    for (int64_t r = 0; r < rows; ++r) {
        const float* xr = x + r * cols;
        float* yr = y + r * cols;
        const int64_t len = (cols + BLOCKS - 1) / BLOCKS;
#pragma omp parallel for schedule(static)
        for (int64_t b = 0; b < BLOCKS; ++b) {
            const int64_t lo = b * len < cols ? b * len : cols;
            const int64_t hi = lo + len < cols ? lo + len : cols;
            total[b] = scan(xr + lo, yr + lo, hi - lo, 0.0f);
        }
        float off[BLOCKS];
        off[0] = 0.0f;
        for (int64_t b = 1; b < BLOCKS; ++b) off[b] = off[b - 1] + total[b - 1];
#pragma omp parallel for schedule(static)
        for (int64_t b = 1; b < BLOCKS; ++b) {
            const int64_t lo = b * len < cols ? b * len : cols;
            const int64_t hi = lo + len < cols ? lo + len : cols;
            const float o = off[b];
#pragma omp simd
            for (int64_t j = lo; j < hi; ++j) yr[j] += o;
        }
    }
}
