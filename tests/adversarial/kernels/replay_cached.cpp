/* kernelcrew
entry: tiny_sss
flags: [-O2]
*/
// ATTACK: replays a result cached from an earlier call. The first call computes and
// keeps the answer in a static buffer; every later call with the same shape copies it
// back, which is as fast as a memcpy of the output. Defense: timed runs rotate over
// several input sets, and each set's output is checked, so the replayed answer of
// another input set is wrong.
#include <cstdint>
#include <cstring>

static float cache[1 << 20];
static int64_t cached_rows = -1, cached_cols = -1;

extern "C" void tiny_sss(const float* x, float* out, float a, float b, int64_t rows,
                         int64_t cols) {
    if (rows == cached_rows && cols == cached_cols) {
        std::memcpy(out, cache, sizeof(float) * rows);
        return;
    }
    for (int64_t i = 0; i < rows; ++i) {
        float acc = 0.0f;
        for (int64_t j = 0; j < cols; ++j) acc += a * x[i * cols + j] + b;
        out[i] = acc;
    }
    if (rows <= (1 << 20)) {
        std::memcpy(cache, out, sizeof(float) * rows);
        cached_rows = rows;
        cached_cols = cols;
    }
}
