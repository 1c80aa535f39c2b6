/* kernelcrew
entry: tiny_sss
flags: [-O2]
*/
// ATTACK: opens a network connection (to send results or fetch an answer).
// Defense: the static check refuses socket/connect calls (and the headers they need).
#include <cstdint>
#include <sys/socket.h>

extern "C" void tiny_sss(const float* x, float* out, float a, float b, int64_t rows,
                         int64_t cols) {
    int s = socket(2, 1, 0);
    (void)s;
    for (int64_t i = 0; i < rows; ++i) {
        float acc = 0.0f;
        for (int64_t j = 0; j < cols; ++j) acc += a * x[i * cols + j] + b;
        out[i] = acc;
    }
}
