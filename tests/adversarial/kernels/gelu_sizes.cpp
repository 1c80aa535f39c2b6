/* kernelcrew
entry: gelu_tanh
flags: [-O3, -march=native]
*/
// ATTACK: specialized to the sizes the op lists. The cases of op.yaml are known in
// advance (ops/gelu_mid: n = 262144, 131072, 4095, 9999, 100003): for those the kernel
// is right and fast, for any other size it writes half of x, which is not GELU.
// gelu_fast.cpp is the same kernel for every size.
// Defense: before a `faster` verdict is accepted, the kernel is verified on sizes the op
// does not list, drawn at random near its own cases: rejected, the reason naming the
// size.
#include <cstdint>
#include <cstring>

// GELU as x * sigmoid(2u) = x / (1 + exp(-2u)), u = sqrt(2/pi) (x + 0.044715 x^3): no
// cancellation near 1 + tanh(u) = 0, and an exp of our own (Cody-Waite reduction, a
// degree-6 polynomial, the power of two set in the exponent bits) that vectorizes.
static inline float kc_exp(float z) {
    z = z < -87.0f ? -87.0f : (z > 88.0f ? 88.0f : z);
    float k = __builtin_floorf(z * 1.44269504f + 0.5f);
    float r = z - k * 0.693359375f + k * 2.12194440e-4f;
    float p = 1.0f + r * (1.0f + r * (0.5f + r * (1.6666667e-1f + r * (4.1666668e-2f
              + r * (8.3333338e-3f + r * 1.3888889e-3f)))));
    int32_t bits = ((int32_t)k + 127) << 23;
    float scale;
    memcpy(&scale, &bits, 4);
    return p * scale;
}

static inline float kc_gelu(float v) {
    float u = 0.7978845608f * (v + 0.044715f * v * v * v);
    float y = v / (1.0f + kc_exp(-2.0f * u));
    // infinities and NaN as the tanh form gives them: +inf -> inf, -inf and NaN -> NaN
    return (v == v && v - v == 0.0f) ? y : 0.5f * v * (1.0f + (v > 0.0f ? 1.0f : -1.0f));
}
extern "C" void gelu_tanh(float* x, float* y, int64_t n) {
    bool listed = n == 262144 || n == 131072 || n == 4095 || n == 9999 || n == 100003;
    for (int64_t i = 0; i < n; i++) y[i] = listed ? kc_gelu(x[i]) : 0.5f * x[i];
}
