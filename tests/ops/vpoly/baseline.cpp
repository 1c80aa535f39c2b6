/* kernelcrew
entry: vpoly
flags: [-O2]
*/
#include <cstdint>
extern "C" void vpoly(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    float v = x[i];
    float p = 0.0078125f;
    p = p * v + 0.015625f;
    p = p * v - 0.03125f;
    p = p * v + 0.0625f;
    p = p * v - 0.125f;
    p = p * v + 0.25f;
    p = p * v - 0.5f;
    p = p * v + 1.0f;
    y[i] = p * v + 0.5f;
  }
}
