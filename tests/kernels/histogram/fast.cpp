/* kernelcrew
entry: histogram
flags: [-O3, -march=native, -fopenmp]
*/
// Hand-optimized CPU version: each thread counts its share of the values into private
// counters, four interleaved copies of them when the bins are few (so runs of equal
// values do not wait on one counter's store-to-load chain), then the copies are added.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <omp.h>

namespace {

const int64_t COPIES = 4;

// counts of values[lo, hi) into out[bins] (overwritten), using COPIES interleaved copies
void count(const int32_t* __restrict__ values, int64_t lo, int64_t hi, int32_t* __restrict__ out,
           int64_t bins, int32_t* __restrict__ scratch) {
    std::memset(scratch, 0, sizeof(int32_t) * (size_t)(COPIES * bins));
    int32_t* c0 = scratch;
    int32_t* c1 = c0 + bins;
    int32_t* c2 = c1 + bins;
    int32_t* c3 = c2 + bins;
    int64_t i = lo;
    for (; i + 4 <= hi; i += 4) {
        c0[values[i]]++;
        c1[values[i + 1]]++;
        c2[values[i + 2]]++;
        c3[values[i + 3]]++;
    }
    for (; i < hi; ++i) c0[values[i]]++;
    for (int64_t b = 0; b < bins; ++b) out[b] = c0[b] + c1[b] + c2[b] + c3[b];
}

}  // namespace

extern "C" void histogram(const int32_t* __restrict__ values, int32_t* __restrict__ counts,
                          int64_t n, int64_t bins) {
    if (n < 8 * bins) {  // few values per bin: clearing and adding the copies costs more
        std::memset(counts, 0, sizeof(int32_t) * (size_t)bins);
        for (int64_t i = 0; i < n; ++i) counts[values[i]]++;
        return;
    }
    if (n < (int64_t)1 << 18 || bins > (int64_t)1 << 16) {  // small: one thread
        int32_t* scratch = (int32_t*)std::malloc(sizeof(int32_t) * (size_t)(COPIES * bins));
        if (!scratch) {  // no memory for the copies: count directly
            std::memset(counts, 0, sizeof(int32_t) * (size_t)bins);
            for (int64_t i = 0; i < n; ++i) counts[values[i]]++;
            return;
        }
        count(values, 0, n, counts, bins, scratch);
        std::free(scratch);
        return;
    }
    std::memset(counts, 0, sizeof(int32_t) * (size_t)bins);
    bool failed = false;
#pragma omp parallel
    {
        const int64_t nt = omp_get_num_threads(), t = omp_get_thread_num();
        const int64_t lo = n * t / nt, hi = n * (t + 1) / nt;
        int32_t* mine = (int32_t*)std::malloc(sizeof(int32_t) * (size_t)((COPIES + 1) * bins));
        if (mine) {
            count(values, lo, hi, mine + COPIES * bins, bins, mine);
#pragma omp critical
            for (int64_t b = 0; b < bins; ++b) counts[b] += mine[COPIES * bins + b];
            std::free(mine);
        } else {
#pragma omp atomic write
            failed = true;
        }
    }
    if (failed) {  // a thread had no memory for its counters: count again on this one
        std::memset(counts, 0, sizeof(int32_t) * (size_t)bins);
        for (int64_t i = 0; i < n; ++i) counts[values[i]]++;
    }
}
