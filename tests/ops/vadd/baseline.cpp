/* kernelcrew
entry: vadd
flags: [-O2]
*/
#include <cstdint>
extern "C" void vadd(const float* x, const float* z, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] + z[i];
}
