"""Hand-unrolled loops rolled back (transforms/reroll.py), the view the loop moves read
first: BLAS-style code (a running sum written as a chain, an update written out per
element, a clean-up loop for what the unroll leaves over) rolled and then vectorized and
threaded, compared bit for bit with the code as written where only the roll applies; and
the bodies that are not an unroll, left alone."""

from __future__ import annotations

import ctypes

import numpy as np
import pytest

from kernelcrew.agents.transforms import apply_transform, parse_any
from kernelcrew.agents.transforms.views.reroll import reroll
from tests.agents.test_reach import build, kernel, pragmas, ptr

# the reference BLAS's daxpy and ddot as C code writes them
BLAS = kernel("""
static void axpy(int n, double da, const double* dx, double* dy) {
    int i, m;
    m = n % 4;
    for (i = 0; i < m; i++) dy[i] = dy[i] + da * dx[i];
    for (i = m; i < n; i += 4) {
        dy[i] = dy[i] + da * dx[i];
        dy[i + 1] = dy[i + 1] + da * dx[i + 1];
        dy[i + 2] = dy[i + 2] + da * dx[i + 2];
        dy[i + 3] = dy[i + 3] + da * dx[i + 3];
    }
}
static double dot(int n, const double* dx, const double* dy) {
    double dtemp = 0.0;
    int m = n % 5;
    for (int i = 0; i < m; i++) dtemp = dtemp + dx[i] * dy[i];
    for (int i = m; i < n; i += 5)
        dtemp = dtemp + dx[i] * dy[i] + dx[i + 1] * dy[i + 1] + dx[i + 2] * dy[i + 2] +
                dx[i + 3] * dy[i + 3] + dx[i + 4] * dy[i + 4];
    return dtemp;
}
extern "C" void f(const double* x, double* y, double* r, double a, int64_t n) {
    axpy((int)n, a, x, y);
    r[0] = dot((int)n, x, y);
}
""")


def _run(lib, n, rng):
    x = rng.standard_normal(n)
    y = rng.standard_normal(n)
    r = np.zeros(1)
    lib.f(ptr(x), ptr(y), ptr(r), ctypes.c_double(0.5), ctypes.c_int64(n))
    return y, r[0]


def test_blas_style_unrolls_roll_back_exactly(tmp_path):
    body = parse_any(BLAS).body
    for fn in ("axpy", "dot"):
        out = reroll(body, fn)
        assert out is not None and "rolled back" in out, fn
        body = out
    assert "i < n; i++) {  // kernelcrew: rolled back (unrolled by 4)" in body
    assert "dtemp = dtemp + dx[i] * dy[i];" in body.split("unrolled by 5")[1]
    written = build(BLAS, tmp_path, "as_written")
    rolled = build(BLAS.replace(parse_any(BLAS).body, body), tmp_path, "rolled")
    for n in (0, 1, 4, 5, 7, 20, 1001):
        a = _run(written, n, np.random.default_rng(n))
        b = _run(rolled, n, np.random.default_rng(n))
        assert np.array_equal(a[0], b[0]) and a[1] == b[1], n  # the same operations, in order


def test_the_moves_take_the_rolled_loop(tmp_path):
    """simd on the code as written vectorizes the step-4 and step-5 loops with strided
    loads; on the rolled view the main loops are unit-stride reductions and updates."""
    text = apply_transform("simd", BLAS)
    assert text is not None and text.count("rolled back") == 2
    assert "omp simd reduction(+ : dtemp)" in pragmas(text)
    text = apply_transform("accumulators", text) or text
    lib = build(text, tmp_path, "moved")
    rng = np.random.default_rng(1)
    for n in (3, 5, 4099):
        x, y = rng.standard_normal(n), rng.standard_normal(n)
        r = np.zeros(1)
        y0 = y.copy()
        lib.f(ptr(x), ptr(y), ptr(r), ctypes.c_double(0.5), ctypes.c_int64(n))
        assert np.allclose(y, y0 + 0.5 * x, rtol=1e-14)
        assert np.isclose(r[0], float(x @ (y0 + 0.5 * x)), rtol=1e-12)


def test_a_start_that_does_not_make_the_rest_divisible_keeps_the_reach(tmp_path):
    """Unrolled by 4 from 0 with no clean-up: the loop reads up to the last group's end;
    the rolled loop runs to the same end, `(n + 3) / 4 * 4`."""
    text = kernel("""
extern "C" void f(const float* x, float* y, int64_t n_) {
    int n = (int)n_;
    for (int i = 0; i < n; i += 4) {
        y[i] = 2.0f * x[i];
        y[i + 1] = 2.0f * x[i + 1];
        y[i + 2] = 2.0f * x[i + 2];
        y[i + 3] = 2.0f * x[i + 3];
    }
}
""")
    out = reroll(parse_any(text).body, "f")
    assert out is not None and "i < (n + 3) / 4 * 4; i++)" in out


@pytest.mark.parametrize("body", [
    # a copy that reads another element than the unroll would
    "s = s + x[i] * y[i] + x[i + 1] * y[i + 2] + x[i + 2] * y[i + 2];",
    # fewer copies than the step
    "s = s + x[i] + x[i + 1];",
    # the sum written the other way round: not the chain the loop rolls into
    "s = x[i] + x[i + 1] + x[i + 2] + s;",
    # statements that are not copies of the first
    "y[i] = x[i];\n        y[i + 1] = x[i];\n        y[i + 2] = x[i + 2];",
    # the counter moved in the body
    "y[i] = x[i]; i++;\n        y[i + 1] = x[i + 1];\n        y[i + 2] = x[i + 2];",
])
def test_bodies_that_are_not_an_unroll_are_left_alone(body):
    text = kernel(f"""
extern "C" void f(const float* x, const float* y0, float* y, int64_t n_) {{
    int n = (int)n_;
    float s = 0.0f;
    for (int i = 0; i < n; i += 3) {{
        {body}
    }}
    y[0] = s + y0[0];
}}
""")
    assert reroll(parse_any(text).body, "f") is None
