"""Reference for add_gelu_muladd: y = gelu(x + r) * s[col] + t[col], in float64.

GELU is the exact form 0.5 * v * (1 + erf(v / sqrt(2))). NumPy has no erf and
SciPy is not a dependency, so erf/erfc are evaluated with W. J. Cody's rational
Chebyshev approximations (Math. Comp. 1969; netlib specfun CALERF), vectorized;
they agree with math.erf to ~1e-16 over the real line. 1 + erf(z) is computed
as erfc(-z) so the result keeps full relative accuracy for negative v.
"""

import numpy as np

_A = (3.16112374387056560e00, 1.13864154151050156e02, 3.77485237685302021e02,
      3.20937758913846947e03, 1.85777706184603153e-1)
_B = (2.36012909523441209e01, 2.44024637934444173e02, 1.28261652607737228e03,
      2.84423683343917062e03)
_C = (5.64188496988670089e-1, 8.88314979438837594e00, 6.61191906371416295e01,
      2.98635138197400131e02, 8.81952221241769090e02, 1.71204761263407058e03,
      2.05107837782607147e03, 1.23033935479799725e03, 2.15311535474403846e-8)
_D = (1.57449261107098347e01, 1.17693950891312499e02, 5.37181101862009858e02,
      1.62138957456669019e03, 3.29079923573345963e03, 4.36261909014324716e03,
      3.43936767414372164e03, 1.23033935480374942e03)
_P = (3.05326634961232344e-1, 3.60344899949804439e-1, 1.25781726111229246e-1,
      1.60837851487422766e-2, 6.58749161529837803e-4, 1.63153871373020978e-2)
_Q = (2.56852019228982242e00, 1.87295284992346047e00, 5.27905102951428412e-1,
      6.05183413124413191e-2, 2.33520497626869185e-3)
_SQRPI = 5.6418958354775628695e-1  # 1 / sqrt(pi)
_THRESH = 0.46875


def _erf_small(x: np.ndarray) -> np.ndarray:
    """erf(x) for |x| <= 0.46875."""
    ysq = x * x
    num = _A[4] * ysq
    den = ysq
    for i in range(3):
        num = (num + _A[i]) * ysq
        den = (den + _B[i]) * ysq
    return x * (num + _A[3]) / (den + _B[3])


def _horner_ratio(y: np.ndarray, num_c, den_c) -> np.ndarray:
    """Cody's nested form (((c[-1]*y + c[0])*y + c[1])*y ... + c[n-2]) / (...), in place."""
    num = num_c[-1] * y
    den = y.copy()
    for i in range(len(den_c) - 1):
        num += num_c[i]
        num *= y
        den += den_c[i]
        den *= y
    num += num_c[-2]
    den += den_c[-1]
    num /= den
    return num


def _erfc_pos(y: np.ndarray) -> np.ndarray:
    """erfc(y) for y > 0.46875 (0 beyond 26.543, where it underflows)."""
    out = np.zeros_like(y)
    mid = y <= 4.0
    ym = y[mid]
    res = _horner_ratio(ym, _C, _D)
    # exp(-y^2) split as exp(-ysq^2) * exp(-(y-ysq)(y+ysq)) to keep full accuracy
    ysq = np.trunc(ym * 16.0)
    ysq /= 16.0
    dl = (ym - ysq) * (ym + ysq)
    ysq *= ysq
    ysq += dl
    np.negative(ysq, out=ysq)
    np.exp(ysq, out=ysq)
    res *= ysq
    out[mid] = res
    big = (~mid) & (y < 26.543)
    if big.any():
        yb = y[big]
        isq = 1.0 / (yb * yb)
        res = isq * _horner_ratio(isq, _P, _Q)
        res = (_SQRPI - res) / yb
        ysq = np.trunc(yb * 16.0) / 16.0
        dl = (yb - ysq) * (yb + ysq)
        out[big] = np.exp(-ysq * ysq) * np.exp(-dl) * res
    return out


def erfc(x: np.ndarray) -> np.ndarray:
    """Complementary error function, float64, elementwise."""
    x = np.asarray(x, dtype=np.float64)
    out = np.empty_like(x)
    ax = np.abs(x)
    small = ax <= _THRESH
    out[small] = 1.0 - _erf_small(x[small])
    large = ~small
    ec = _erfc_pos(ax[large])
    out[large] = np.where(x[large] < 0.0, 2.0 - ec, ec)
    return out


def erf(x: np.ndarray) -> np.ndarray:
    """Error function, float64, elementwise."""
    x = np.asarray(x, dtype=np.float64)
    out = np.empty_like(x)
    ax = np.abs(x)
    small = ax <= _THRESH
    out[small] = _erf_small(x[small])
    large = ~small
    out[large] = np.copysign(1.0 - _erfc_pos(ax[large]), x[large])
    return out


def gelu(v: np.ndarray) -> np.ndarray:
    """Exact GELU: 0.5 * v * (1 + erf(v / sqrt(2))) = 0.5 * v * erfc(-v / sqrt(2))."""
    v = np.asarray(v, dtype=np.float64)
    return 0.5 * v * erfc(-v / np.sqrt(2.0))


def reference(**kw) -> dict[str, np.ndarray]:
    x = np.asarray(kw["x"], dtype=np.float64)
    r = np.asarray(kw["r"], dtype=np.float64)
    s = np.asarray(kw["s"], dtype=np.float64)
    t = np.asarray(kw["t"], dtype=np.float64)
    return {"y": gelu(x + r) * s + t}
