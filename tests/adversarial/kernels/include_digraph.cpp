/* kernelcrew
entry: tiny_sss
flags: [-O2]
*/
// ATTACK: includes a host file, spelled with the digraph `%:` for `#`, so a check
// looking for `#include` misses it; the compiler would then quote /etc/passwd in its
// errors. Defense: the static check reads `%:` as `#` (as the compiler does) and
// refuses the include before the compiler runs.
#include <cstdint>
%:include "/etc/passwd"

extern "C" void tiny_sss(const float* x, float* out, float a, float b, int64_t rows,
                         int64_t cols) {
    out[0] = x[0] * a + b + (float)(rows * cols);
}
