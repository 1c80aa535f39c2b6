"""vector_math_ext: float `tanh`/`log` calls in loops replaced by inline, vectorizable
versions (kc_tanhf, kc_logf).

Like the exp/erf replacements (`vector_exp_erf`), these are inline and branch-free
(selects only, no table look-ups), so a loop that calls them vectorizes under `omp simd` /
-O3 on AVX2 as on AVX-512. Accuracy: kc_tanhf within 2 ulp, kc_logf within 2 ulp over the
whole float range
(subnormals, 0, inf, NaN and negative arguments as libm gives them), far inside any float32
tolerance. A sigmoid written `1 / (1 + exp(-x))` is the exp replacement's business.

Legal where a call takes one float argument inside a loop of the entry; refused for a
function that computes in double anywhere (the replacements are float-accurate).
`1 + tanh(u)` and `1 - tanh(u)` become one call of kc_tanh1p (no cancellation).
"""

from __future__ import annotations

from kernelcrew.agents.transforms.analysis.math_calls import replace_math_calls

SELECT = """\
// c ? a : b on the bits: both arms are already computed, so g++ if-converts and
// vectorizes it even where a `?:` on a float multiply would stay a branch (-ftrapping-math)
static inline float kcx_sel(bool c, float a, float b) {
    unsigned ua, ub;
    __builtin_memcpy(&ua, &a, sizeof ua);
    __builtin_memcpy(&ub, &b, sizeof ub);
    const unsigned m = 0u - (unsigned)c;
    const unsigned r = (ua & m) | (ub & ~m);
    float f;
    __builtin_memcpy(&f, &r, sizeof f);
    return f;
}
"""

EXP = """\
// e^y for y in [-87, 87] (callers clamp): y = n ln 2 + r, |r| <= ln2/2, e^r by a degree-7
// polynomial, 2^n built in the exponent bits (a normal float for n in [-126, 126]);
// within 1 ulp, branch-free.
static inline float kcx_exp(float y) {
    const float tt = y * 1.44269504088896341f + 12582912.0f;  // round to nearest integer
    const float n = tt - 12582912.0f;
    int ni;
    __builtin_memcpy(&ni, &tt, sizeof ni);
    ni -= 0x4B400000;
    float r = y - n * 0.693359375f;
    r = r - n * -2.12194440e-4f;
    float q = 1.9875691500e-4f;
    q = q * r + 1.3981999507e-3f;
    q = q * r + 8.3334519073e-3f;
    q = q * r + 4.1665795894e-2f;
    q = q * r + 1.6666665459e-1f;
    q = q * r + 5.0000001201e-1f;
    const int bits = (ni + 127) << 23;
    float scale;
    __builtin_memcpy(&scale, &bits, sizeof scale);
    return (q * r * r + r + 1.0f) * scale;
}
"""

TANHF = """\
// tanh(x): x + x^3 P(x^2) for |x| < 0.625, else sign(x) (1 - 2 / (e^{2|x|} + 1)) with
// e^y by kcx_exp (|x| clamped to 20, where tanh is 1 in float); within 2 ulp, branch-free.
static inline float kc_tanhf(float x) {
    const float ax = __builtin_fabsf(x);
    const float z = x * x;
    float p = -5.7188915337686025e-03f;
    p = p * z + 2.065306392537377e-02f;
    p = p * z + -5.374464034414642e-02f;
    p = p * z + 1.333151246851843e-01f;
    p = p * z + -3.333328521293433e-01f;
    const float small = x + x * z * p;
    const float y = 2.0f * kcx_sel(ax < 20.0f, ax, 20.0f);
    const float e = kcx_exp(y);  // y in [0, 40]
    const float big = __builtin_copysignf(1.0f - 2.0f / (e + 1.0f), x);
    return kcx_sel((ax < 0.625f) | (x != x), small, big);  // NaN: small is NaN
}
"""

LOGF = """\
// log(x) = e ln 2 + log(m), m in [sqrt(1/2), sqrt(2)), log(m) = 2 atanh((m-1)/(m+1)) by
// its odd series; subnormals scaled first; within 2 ulp, branch-free.
static inline float kc_logf(float x) {
    const bool sub = x < 1.17549435e-38f;
    const float xm = x * 8388608.0f;
    const float xs = kcx_sel(sub, xm, x);
    int ix;
    __builtin_memcpy(&ix, &xs, sizeof ix);
    const int t = ix - 0x3f3504f3;
    const int ex = (t >> 23) - (sub ? 23 : 0);
    const int mb = (t & 0x007fffff) + 0x3f3504f3;
    float mnt;
    __builtin_memcpy(&mnt, &mb, sizeof mnt);
    const float f = mnt - 1.0f;
    const float s = f / (mnt + 1.0f);
    const float s2 = s * s;
    float p = 0.11111111f;
    p = p * s2 + 0.14285715f;
    p = p * s2 + 0.2f;
    p = p * s2 + 0.33333334f;
    const float lm = 2.0f * s + 2.0f * s * s2 * p;
    const float fe = (float)ex;
    const float r = fe * 0.693145751953125f + (lm + fe * 1.428606765330187e-06f);
    const float inf = __builtin_inff();
    const float special = kcx_sel(x == 0.0f, -inf, kcx_sel(x == inf, inf, __builtin_nanf("")));
    return kcx_sel((x > 0.0f) & (x < inf), r, kcx_sel(x != x, x, special));
}
"""

TANH1P = """\
// 1 + tanh(x) = 2 / (1 + e^{-2x}), an identity: one exp and one division, branch-free,
// and without the cancellation of 1 + tanh(x) for x << 0 (GELU's tanh form is
// 0.5 x (1 + tanh(u))). e^y by kcx_exp, y clamped to [-87, 87], where the
// result is 2 or under 4e-38; within 3 ulp of the float64 value; NaN gives NaN.
static inline float kc_tanh1pf(float x) {
    float y = -2.0f * x;
    y = kcx_sel(y < 87.0f, y, 87.0f);
    y = kcx_sel(y > -87.0f, y, -87.0f);
    const float e = kcx_exp(y);
    return kcx_sel(x != x, x, 2.0f / (1.0f + e));
}
"""

HELPERS = {"kcx_sel": (SELECT, ()), "kcx_exp": (EXP, ()),
           "kc_tanhf": (TANHF, ("kcx_sel", "kcx_exp")),
           "kc_tanh1pf": (TANH1P, ("kcx_sel", "kcx_exp")), "kc_logf": (LOGF, ("kcx_sel",))}
REPLACE = {"tanh": "kc_tanhf", "tanhf": "kc_tanhf", "std::tanh": "kc_tanhf",
           "log": "kc_logf", "logf": "kc_logf", "std::log": "kc_logf"}
ONE_PLUS = {"tanh": "kc_tanh1pf", "tanhf": "kc_tanh1pf", "std::tanh": "kc_tanh1pf"}


def vector_math_ext(src: str, entry: str) -> str | None:
    """Replace float `tanh`/`log` calls inside the loops of `entry` by inline vectorizable
    versions (kc_tanhf, kc_logf), defined before the function; `1 + tanh(u)` as a whole by
    kc_tanh1pf(u) (and `1 - tanh(u)` by kc_tanh1pf(-(u))), half the work of kc_tanhf.
    Refused for functions that compute in double."""
    return replace_math_calls(src, entry, REPLACE, HELPERS, one_plus=ONE_PLUS)
