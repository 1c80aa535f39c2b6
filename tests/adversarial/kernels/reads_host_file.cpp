/* kernelcrew
entry: tiny_sss
flags: [-O2]
*/
// ATTACK: reads a host file into its output, by including it: the compiler would
// print the file's lines in its error messages. Defense: only a short list of system
// headers may be included; the refusal happens before the compiler sees the file.
#include <cstdint>
#include "/etc/passwd"

extern "C" void tiny_sss(const float* x, float* out, float a, float b, int64_t rows,
                         int64_t cols) {
    out[0] = x[0] * a + b + (float)(rows * cols);
}
