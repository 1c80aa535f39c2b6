/* kernelcrew
entry: tiny_sss
flags: [-O2]
*/
// ATTACK: a compile bomb. Each instantiation of Bomb<N, K> instantiates two distinct
// Bomb<N - 1, ...>, so the compiler faces 2^40 class templates (time and memory
// without end), all within the default template depth. Defense: the compiler runs
// sandboxed with its own wall-clock timeout, CPU and memory limits; the verdict says
// the compile timed out or was killed, and the next kernel compiles normally.
#include <cstdint>

template <int N, long K>
struct Bomb {
    static constexpr long value = Bomb<N - 1, 2 * K>::value + Bomb<N - 1, 2 * K + 1>::value;
};
template <long K>
struct Bomb<0, K> {
    static constexpr long value = K & 1;
};

extern "C" void tiny_sss(const float* x, float* out, float a, float b, int64_t rows,
                         int64_t cols) {
    out[0] = x[0] * a + b + (float)(rows * cols) + (float)Bomb<40, 1>::value;
}
