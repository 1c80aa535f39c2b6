/* kernelcrew
entry: histogram
flags: [-O2]
*/
// The textbook histogram: clear the counters, then one increment per value.
#include <cstring>
#include <stdint.h>

extern "C" void histogram(const int32_t* values, int32_t* counts, int64_t n, int64_t bins) {
    memset(counts, 0, sizeof(int32_t) * (size_t)bins);
    for (long i = 0; i < n; i++) {
        counts[values[i]]++;
    }
}
