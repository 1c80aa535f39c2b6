/* kernelcrew
entry: tiny_sss
flags: [-O2, -fopenmp]
*/
// ATTACK: moves its threads where the parent did not place them: every OpenMP thread
// pins itself to CPU 0 with `sched_setaffinity` (declared by hand), so in a duel its
// team would crowd the CPU the other kernel's worker is placed on next.
// Defense (this file: the first layer): after compiling, the library's undefined
// dynamic symbols must be on the allow-list; scheduling and affinity calls are not, and
// the kernel is refused before it runs, naming `sched_setaffinity`. The worker's
// seccomp guard refuses the system call too (see test_guard.py).
#include <cstdint>

extern "C" int sched_setaffinity(int pid, unsigned long size, const unsigned long* mask);

extern "C" void tiny_sss(const float* x, float* out, float a, float b, int64_t rows,
                         int64_t cols) {
#pragma omp parallel
    {
        unsigned long mask[16] = {1};
        sched_setaffinity(0, sizeof mask, mask);
    }
    for (int64_t i = 0; i < rows; ++i) {
        float acc = 0.0f;
        for (int64_t j = 0; j < cols; ++j) acc += a * x[i * cols + j] + b;
        out[i] = acc;
    }
}
