/* kernelcrew
entry: vadd
flags: [-O2]
*/
// A deliberately slow baseline: the add is done eight times through a volatile, so it
// stays scalar and repeated. The scripted LLM's kernel then wins by far more than the
// noise band of a loaded CI machine, and the acceptance test does not depend on luck.
#include <cstdint>
extern "C" void vadd(const float* x, const float* z, float* y, int64_t n) {
  for (int r = 0; r < 8; ++r)
    for (int64_t i = 0; i < n; ++i) { volatile float t = x[i] + z[i]; y[i] = t; }
}
