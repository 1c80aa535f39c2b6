"""vector_math: float `exp`/`erf` calls in loops replaced by inline, vectorizable
versions (kc_expf, kc_erff).

g++ cannot vectorize a loop that calls `expf`/`erff` (glibc's vector variants are only
declared under -ffast-math, which the op tolerances do not allow). These inline
versions are accurate to about 1 ulp (exp) and 2e-7 absolute (erf), well inside any
float32 tolerance, and vectorize under `omp simd` / -O3 on any SIMD ISA.

They are branch-free in the form the compiler sees, not only in the source: a float
ternary (`x > hi ? hi : x`) lets GCC thread jumps through the clamp (the clamped path
folds to constants), which leaves control flow in the loop; with -ftrapping-math (the
default) the floating-point work on those paths cannot be if-converted without masked
lanes, so such a loop vectorizes on AVX-512 and not on AVX2. Every edge here is an
integer-mask select on the bits of the operand instead.

Legal where a call takes one float argument (no double in it) inside a `for` loop of the
entry; refused for a function that computes in double anywhere (the replacements are
float-accurate), and for calls outside loops (nothing to vectorize there).
"""

from __future__ import annotations

from kernelcrew.agents.transforms.analysis.math_calls import replace_math_calls

BITS = """\
// a float's bits as an int and back (selects on these are plain integer masks)
static inline int kc_as_int(float f) {
    int i;
    __builtin_memcpy(&i, &f, sizeof i);
    return i;
}
static inline float kc_as_float(int i) {
    float f;
    __builtin_memcpy(&f, &i, sizeof f);
    return f;
}
"""

EXPF = """\
// exp(x) as 2^n * e^r, n = round(x / ln 2), |r| <= ln 2 / 2 (Cody-Waite), e^r by a
// degree-6 polynomial: about 1 ulp. Branch-free: every edge (overflow, underflow, NaN)
// is an integer-mask select on the bits of x, so the loop vectorizes without masked
// lanes (AVX2, SSE, NEON) as well as with them (AVX-512).
static inline float kc_expf(float x) {
    const int xi = kc_as_int(x);
    const unsigned ux = (unsigned)xi;
    const int nan = -(int)((ux & 0x7FFFFFFFu) > 0x7F800000u);
    const int over = -(int)(xi > 0x42B17218);      // x > 88.7228394 (+inf, +NaN too)
    const int under = -(int)(ux > 0xC2CFF1B5u);    // x < -103.972084 (-inf, -NaN too)
    const float xc = kc_as_float((xi & ~over & ~under) | (0x42B17218 & over) |
                                 ((int)0xC2CFF1B5u & under));  // x clamped, bitwise
    const float t = xc * 1.44269504088896341f + 12582912.0f;  // round to nearest integer
    const float n = t - 12582912.0f;
    const int ni = kc_as_int(t) - 0x4B400000;
    float r = xc - n * 0.693359375f;
    r = r - n * -2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    const float y = p * r * r + r + 1.0f;
    const int h = ni >> 1;  // 2^n as two factors: each stays a normal float
    const float e = y * kc_as_float((h + 127) << 23) * kc_as_float((ni - h + 127) << 23);
    const int bits = (kc_as_int(e) & ~over & ~under) | (0x7F800000 & over);  // inf, 0
    return kc_as_float((bits & ~nan) | (xi & nan));  // NaN stays NaN
}
"""

ERFF = """\
// erf(z): z * P(z^2) for |z| < 0.921875, else sign(z) * (1 - exp(Q(|z|))) (erfc as the
// exponential of a fitted polynomial); absolute error below 2e-7. Branch-free: both
// forms are computed and chosen by integer masks on the bits of z.
static inline float kc_erff(float z) {
    const int zi = kc_as_int(z);
    const int ai = zi & 0x7FFFFFFF;  // |z|, bitwise; non-negative floats order as ints
    const int nan = -(int)(ai > 0x7F800000);
    const float s = z * z;
    float p = 8.370244177058339e-05f;
    p = p * s + -0.0008142744190990925f;
    p = p * s + 0.00520103657618165f;
    p = p * s + -0.026859400793910027f;
    p = p * s + 0.11283695697784424f;
    p = p * s + -0.37612634897232056f;
    p = p * s + 1.128379225730896f;
    const float small = z * p;
    const int big = -(int)(ai > 0x40800000);  // |z| > 4 (or NaN): erfc is 0 in float
    const float u = kc_as_float((ai & ~big) | (0x40800000 & big)) - 2.5f;
    float q = 1.6024924889279646e-06f;
    q = q * u + -1.3304783351486549e-05f;
    q = q * u + 7.744580216240138e-05f;
    q = q * u + -0.0004201635019853711f;
    q = q * u + 0.002165090525522828f;
    q = q * u + -0.010858495719730854f;
    q = q * u + -0.9438936114311218f;
    q = q * u + -5.352680683135986f;
    q = q * u + -7.806815147399902f;
    const int qi = kc_as_int(q);
    const float ec = kc_expf(kc_as_float(qi & (qi >> 31)));  // erfc(|z|) = exp(min(q, 0))
    const int large = kc_as_int(1.0f - ec) ^ (zi & (int)0x80000000u);  // sign of z
    const int near = -(int)(ai < 0x3F6C0000);  // |z| < 0.921875
    const int v = (kc_as_int(small) & near) | (large & ~near);
    return kc_as_float((v & ~nan) | (zi & nan));  // NaN stays NaN
}
"""

HELPERS = {"kc_as_int": (BITS, ()), "kc_expf": (EXPF, ("kc_as_int",)),
           "kc_erff": (ERFF, ("kc_expf",))}
REPLACE = {"exp": "kc_expf", "expf": "kc_expf", "std::exp": "kc_expf",
           "erf": "kc_erff", "erff": "kc_erff", "std::erf": "kc_erff"}


def vector_math(src: str, entry: str) -> str | None:
    """Replace float `exp`/`erf` calls inside the for loops of `entry` by inline,
    vectorizable versions (kc_expf, kc_erff), adding their definitions before the function.
    Refused for functions that compute in double (the replacements are float-accurate)."""
    return replace_math_calls(src, entry, REPLACE, HELPERS, loops=("for_statement",))
