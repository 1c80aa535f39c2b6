/* kernelcrew
entry: axpy
flags: [-O2]
*/
#include <cstdint>
extern "C" void axpy(const float* x, const float* z, float* y, float a, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = a * x[i] + z[i];
}
