"""reciprocal: a division by a float the loop does not change becomes a multiply by its
reciprocal, taken once before the loop; compiled and compared with NumPy, and left alone
where the divisor changes in the loop, is an integer, an element, or may change through
its address."""

from __future__ import annotations

import ctypes

import numpy as np
import pytest

from kernelcrew.agents.transforms import apply_transform
from kernelcrew.agents.transforms.catalogue import not_applicable
from tests.agents.test_reach import build, kernel, ptr

# rows normalized by their totals, in a helper, both division forms
NORMALIZE = kernel("""
static void normalize(float* y, const float* x, int rows, int cols) {
    for (int i = 0; i < rows; i++) {
        float total = 0.0f;
        for (int j = 0; j < cols; j++) total += x[i * cols + j];
        for (int j = 0; j < cols; j++) y[i * cols + j] = x[i * cols + j] / total;
        double scale = (double)cols;
        for (int j = 0; j < cols; j++)
            y[i * cols + j] /= (float)scale;
    }
}
extern "C" void f(const float* x, float* y, int64_t rows, int64_t cols) {
    normalize(y, x, (int)rows, (int)cols);
}
""")


def test_divisions_by_a_row_total_become_multiplies(tmp_path):
    text = apply_transform("reciprocal", NORMALIZE)
    assert text is not None
    assert "const float kc_inv_total = 1.0f / total;" in text
    assert "y[i * cols + j] = x[i * cols + j] * kc_inv_total;" in text
    assert "/= (float)scale" in text  # a cast divisor is an expression: left as it is
    lib = build(text, tmp_path)
    rng = np.random.default_rng(7)
    for rows, cols in ((5, 300), (1, 1), (3, 7)):
        x = rng.random((rows, cols)).astype(np.float32) + 0.5
        y = np.full((rows, cols), np.nan, np.float32)
        lib.f(ptr(x), ptr(y), ctypes.c_int64(rows), ctypes.c_int64(cols))
        xd = x.astype(np.float64)
        assert np.allclose(y, xd / xd.sum(1, keepdims=True) / cols, rtol=1e-5)


def test_a_loop_that_is_the_body_of_another_gets_a_block():
    text = apply_transform("reciprocal", kernel("""
extern "C" void f(const float* x, float* y, float s, int64_t n) {
    for (int64_t r = 0; r < 4; r++)
        for (int64_t i = 0; i < n; i++) y[r * n + i] = x[r * n + i] / s;
}
"""))
    assert text is not None and "{\n        const float kc_inv_s = 1.0f / s;" in text


@pytest.mark.parametrize("body", [
    # the divisor changes in the loop
    "float d = 1.0f; for (int i = 0; i < n; i++) { y[i] = x[i] / d; d = d + 1.0f; }",
    # an integer division
    "int d = 3; for (int i = 0; i < n; i++) y[i] = (float)((int)x[i] / d);",
    # a division by an element: a different divisor every iteration
    "for (int i = 0; i < n; i++) y[i] = 1.0f / x[i];",
    # the divisor's address escapes, so a call could change it
    "float d = 2.0f; float* p = &d; for (int i = 0; i < n; i++) { y[i] = x[i] / d; *p = x[i]; }",
])
def test_divisions_that_must_stay_divisions(body):
    text = kernel(f'extern "C" void f(const float* x, float* y, int n) {{\n    {body}\n}}\n')
    assert apply_transform("reciprocal", text) is None
    assert "reciprocal" in not_applicable(text)


# ---------------------------------------------------------------- float_pow

# a per-filter variance as a CNN framework writes it: pow of a float deviation into a float
# sum (C's pow computes in double), in a helper the entry calls; a typedef'd float too
VARIANCE = kernel("""
#include <math.h>
typedef float real;
static void variance(const float *x, const float *mean, int batch, int filters, int spatial,
                     real *var)
{
    float scale = 1./(batch * spatial - 1);
    int i, j, k;
    for (i = 0; i < filters; ++i) {
        var[i] = 0;
        for (j = 0; j < batch; ++j) {
            for (k = 0; k < spatial; ++k) {
                int index = j*filters*spatial + i*spatial + k;
                var[i] += pow((x[index] - mean[i]), 2) + pow(x[index], 3.0) * 0.0f;
            }
        }
        var[i] *= scale;
    }
}
extern "C" void f(const float* x, const float* mean, float* var, int64_t b, int64_t c,
                  int64_t s) {
    variance(x, mean, (int)b, (int)c, (int)s, var);
}
""")


def test_a_float_squared_into_a_float_sum_is_a_float_product(tmp_path):
    text = apply_transform("float_pow", VARIANCE)
    assert text is not None and "pow(" not in text.split("static void")[1]
    assert "((x[index] - mean[i]) * (x[index] - mean[i]))" in text
    assert "((x[index]) * (x[index]) * (x[index]))" in text
    lib = build(text, tmp_path)
    rng = np.random.default_rng(3)
    for b, c, s in ((2, 3, 5), (4, 8, 300), (1, 1, 2)):
        x = rng.standard_normal((b, c, s)).astype(np.float32)
        mean = x.astype(np.float64).mean((0, 2)).astype(np.float32)
        var = np.full(c, np.nan, np.float32)
        lib.f(ptr(x), ptr(mean), ptr(var), ctypes.c_int64(b), ctypes.c_int64(c),
              ctypes.c_int64(s))
        dev = x.astype(np.float64) - mean[None, :, None]
        want = (dev ** 2).sum((0, 2)) / (b * s - 1)
        assert np.allclose(var, want, rtol=1e-5), (b, c, s)


@pytest.mark.parametrize("body", [
    # a double sum: the square in double is what the code keeps
    "double acc = 0; for (int i = 0; i < n; i++) acc += pow(x[i], 2); y[0] = (float)acc;",
    # a double literal on the way: the sum is computed in double
    "for (int i = 0; i < n; i++) y[i] = pow(x[i], 2) * 0.5;",
    # a double base
    "for (int i = 0; i < n; i++) y[i] = pow((double)x[i] - 1.0, 2);",
    # another exponent: a real power, not a product
    "for (int i = 0; i < n; i++) y[i] = pow(x[i], 2.5);",
    # a base with a call in it is not written twice
    "for (int i = 0; i < n; i++) y[i] = pow(sqrtf(x[i]), 2);",
    # the result goes into a double declaration
    "for (int i = 0; i < n; i++) { double d = pow(x[i], 2); y[i] = (float)d; }",
])
def test_powers_that_stay_calls(body):
    text = kernel("#include <math.h>\n"
                  f'extern "C" void f(const float* x, float* y, int n) {{\n    {body}\n}}\n')
    assert apply_transform("float_pow", text) is None
    assert "float_pow" in not_applicable(text)


def test_the_loop_specialist_proposes_float_pow_where_it_applies():
    from tests.agents.test_specialists import all_proposals, ctx_for

    kinds = [p.change.kind for p in all_proposals(ctx_for("variance", kernel=VARIANCE))]
    assert "float_pow" in kinds


def test_float_pow_over_a_row_pointer_into_a_local_sum(tmp_path):
    """The same square read through a row pointer into a float local, `int` counters."""
    text = apply_transform("float_pow", kernel("""
#include <math.h>
extern "C" void f(const float* x, const float* mean, float* out, int64_t rows, int64_t cols) {
    for (int i = 0; i < (int)rows; i++) {
        const float* xr = x + (int64_t)i * cols;
        float s = 0.0f;
        for (int j = 0; j < (int)cols; j++) s += pow(xr[j] - mean[i], 2.0);
        out[i] = s;
    }
}
"""))
    assert text is not None and "((xr[j] - mean[i]) * (xr[j] - mean[i]))" in text
    lib = build(text, tmp_path)
    rng = np.random.default_rng(5)
    x = rng.standard_normal((4, 300)).astype(np.float32)
    mean = x.mean(1).astype(np.float32)
    out = np.full(4, np.nan, np.float32)
    lib.f(ptr(x), ptr(mean), ptr(out), ctypes.c_int64(4), ctypes.c_int64(300))
    assert np.allclose(out, ((x.astype(np.float64) - mean[:, None]) ** 2).sum(1), rtol=1e-5)
