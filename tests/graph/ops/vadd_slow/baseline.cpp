/* kernelcrew
entry: vadd_slow
flags: [-O2]
*/
// The work done sixteen times over (volatile stops the compiler eliding it): any plain
// loop beats it by far, so the gate accepts one on any machine.
#include <cstdint>
extern "C" void vadd_slow(const float* x, const float* z, float* y, int64_t n) {
  for (int r = 0; r < 16; ++r)
    for (int64_t i = 0; i < n; ++i) { volatile float t = x[i] + z[i]; y[i] = t; }
}
