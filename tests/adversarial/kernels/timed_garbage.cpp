/* kernelcrew
entry: tiny_sss
flags: [-O2]
*/
// ATTACK: correct on its first call for each buffer, garbage afterwards. A harness
// that checks only the first call (and then times whatever runs) would accept it; the
// timed calls do almost nothing. Defense: the outputs of every timed run are sampled for
// the parent's poison, and three timed runs per case, chosen by the parent in secret,
// are compared in full with the reference of that run's (changed) inputs.
#include <cstdint>

static const float* seen[64];
static int nseen = 0;

extern "C" void tiny_sss(const float* x, float* out, float a, float b, int64_t rows,
                         int64_t cols) {
    for (int k = 0; k < nseen; ++k) {
        if (seen[k] == x) {
            for (int64_t i = 0; i < rows; ++i) out[i] = 1.0f;
            return;
        }
    }
    if (nseen < 64) seen[nseen++] = x;
    for (int64_t i = 0; i < rows; ++i) {
        float acc = 0.0f;
        for (int64_t j = 0; j < cols; ++j) acc += a * x[i * cols + j] + b;
        out[i] = acc;
    }
}
