/* kernelcrew
entry: expmul
flags: [-O3, -march=native]
*/
#include <cmath>
#include <cstdint>
extern "C" void expmul(const float* x, const float* g, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = std::exp(x[i]) * g[i];
}
