/* kernelcrew
entry: tiny_sss
flags: [-O2]
*/
// ATTACK: includes a host file behind a string literal continued with a backslash. A
// check that blanks the string as one line shifts its line numbers by one, and then
// judges each include by the text of the line above it (an allowed header).
// Defense: the static check refuses backslash line continuations (the compiler joins
// those lines before it reads anything) and keeps its lines aligned with the file's.
#include <cstdint>
static const char* note = "a\
#include <cmath>";
#include <cstdint>
#include "/etc/passwd"

extern "C" void tiny_sss(const float* x, float* out, float a, float b, int64_t rows,
                         int64_t cols) {
    out[0] = x[0] * a + b + (float)(rows * cols) + (float)note[0];
}
