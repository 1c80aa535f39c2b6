/* kernelcrew
entry: tiny_sss
flags: [-O2]
*/
// ATTACK: writes a file outside its scratch directory with fopen (here: /tmp).
// Defense: the static check refuses file and system calls before the compiler runs
// (<cstdio> is not even an allowed include).
#include <cstdint>
#include <cstdio>

extern "C" void tiny_sss(const float* x, float* out, float a, float b, int64_t rows,
                         int64_t cols) {
    FILE* f = fopen("/tmp/kernelcrew_adv_marker", "w");
    if (f) fclose(f);
    for (int64_t i = 0; i < rows; ++i) {
        float acc = 0.0f;
        for (int64_t j = 0; j < cols; ++j) acc += a * x[i * cols + j] + b;
        out[i] = acc;
    }
}
