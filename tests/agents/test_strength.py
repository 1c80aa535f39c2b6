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
