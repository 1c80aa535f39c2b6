/* kernelcrew
entry: vadd
flags: [-O2]
*/
// Does the baseline's work three times over (volatile stops the compiler eliding it).
#include <cstdint>
extern "C" void vadd(const float* x, const float* z, float* y, int64_t n) {
  for (int r = 0; r < 3; ++r)
    for (int64_t i = 0; i < n; ++i) { volatile float t = x[i] + z[i]; y[i] = t; }
}
