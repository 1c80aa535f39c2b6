/* kernelcrew
entry: tiny_sss
flags: [-O2]
*/
// ATTACK: reads a host file (/etc/passwd) at run time with fopen and packs its bytes
// into the output. Defense: the static check refuses fopen (and <cstdio>).
#include <cstdint>
#include <cstdio>

extern "C" void tiny_sss(const float* x, float* out, float a, float b, int64_t rows,
                         int64_t cols) {
    FILE* f = fopen("/etc/passwd", "r");
    for (int64_t i = 0; i < rows; ++i) out[i] = f ? (float)fgetc(f) : x[i] * a + b + cols;
}
