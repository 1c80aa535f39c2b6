"""Unroll-and-jam of a nest whose outer loop carries a reduction in its wrap-up only: the
scores of one query against every key with their running maximum (attention's first pass),
a running total of the dot products. The jam runs the copies' wrap-ups in the original
order, so such a reduction is legal; one that the set-up or the inner loop reads is not."""

from __future__ import annotations

import ctypes
import re

import numpy as np
import pytest

from kernelcrew.agents.transforms import apply_transform
from kernelcrew.agents.transforms.cpu.unroll_and_jam import jam_reasons
from kernelcrew.agents.transforms.views import canonical
from tests.agents.test_private_bins import ROWS_INTO_Y as VECMAT
from tests.agents.test_reach import build, kernel, ptr

# the scores of each query row against all keys, through a helper, `int` counters, row
# pointers, the maximum kept by an if (attention's first pass, as C code writes it)
SCORES = kernel("""
static float dot(const float* a, const float* b, int n) {
    float s = 0.0f;
    for (int i = 0; i < n; i++) s += a[i] * b[i];
    return s;
}

extern "C" void f(const float* q, const float* k, float* sc, float* mx, float scale,
                  int64_t T_, int64_t D_) {
    int T = (int)T_, D = (int)D_;
    for (int t = 0; t < T; t++) {
        const float* qt = q + t * D;
        float best = -INFINITY;
        for (int s = 0; s < T; s++) {
            float score = dot(qt, k + s * D, D) * scale;
            sc[t * T + s] = score;
            if (score > best) best = score;
        }
        mx[t] = best;
    }
}
""")

# a running total of the dot products written after each one: a scan carried by the
# wrap-up, legal to jam because the wrap-ups keep their order
RUNNING = kernel("""
extern "C" void f(const float* a, const float* x, float* out, int64_t m, int64_t n) {
    float total = 0.0f;
    for (int64_t i = 0; i < m; ++i) {
        float d = 0.0f;
        for (int64_t j = 0; j < n; ++j) d += a[i * n + j] * x[j];
        total += d;
        out[i] = total;
    }
}
""")


def test_a_running_max_in_the_wrap_up_is_jammed_and_stays_correct(tmp_path):
    text = apply_transform("unroll_and_jam", SCORES)
    assert text is not None and "jammed by 4" in text
    # the four scores' maxima in order, after one shared pass over the query row
    assert text.count("if (score") == 4 + 1  # four copies, and the leftover loop's
    lib = build(text, tmp_path)
    rng = np.random.default_rng(3)
    for t, d in ((1, 1), (3, 5), (4, 8), (9, 33), (130, 64)):
        q = rng.standard_normal((t, d)).astype(np.float32)
        k = rng.standard_normal((t, d)).astype(np.float32)
        sc = np.full((t, t), np.nan, np.float32)
        mx = np.full(t, np.nan, np.float32)
        lib.f(ptr(q), ptr(k), ptr(sc), ptr(mx), ctypes.c_float(0.125), ctypes.c_int64(t),
              ctypes.c_int64(d))
        want = (q.astype(np.float64) @ k.T.astype(np.float64)) * 0.125
        assert np.allclose(sc, want, rtol=1e-4, atol=1e-5), (t, d)
        # the maximum is taken over the scores as computed, so it is one of them exactly
        assert np.array_equal(mx, sc.max(axis=1)), (t, d)


def test_a_running_total_in_the_wrap_up_is_jammed_and_stays_correct(tmp_path):
    text = apply_transform("unroll_and_jam", RUNNING)
    assert text is not None and "jammed by 4" in text
    lib = build(text, tmp_path)
    rng = np.random.default_rng(5)
    for m, n in ((1, 3), (5, 7), (8, 16), (37, 100)):
        a = rng.standard_normal((m, n)).astype(np.float32)
        x = rng.standard_normal(n).astype(np.float32)
        out = np.full(m, np.nan, np.float32)
        lib.f(ptr(a), ptr(x), ptr(out), ctypes.c_int64(m), ctypes.c_int64(n))
        want = np.cumsum(a.astype(np.float64) @ x)
        assert np.allclose(out, want, rtol=1e-4, atol=1e-3), (m, n)


@pytest.mark.parametrize("body, why", [
    # the set-up starts from the reduction: each dot product depends on the one before
    (("float d = total; for (int64_t j = 0; j < n; ++j) d += a[i * n + j] * x[j]; "
     "total = d; out[i] = d;"), "total is carried by more than the set-up or the wrap-up"),
    # the inner loop reads the running value
    (("float d = 0.0f; for (int64_t j = 0; j < n; ++j) d += a[i * n + j] * x[j] * total; "
     "total += d; out[i] = d;"), "total is carried by more than the set-up or the wrap-up"),
])
def test_a_reduction_the_next_dot_product_reads_is_not_jammed(body, why):
    src = kernel("extern \"C\" void f(const float* a, const float* x, float* out, "
                 "int64_t m, int64_t n) {\n    float total = 1.0f;\n"
                 f"    for (int64_t i = 0; i < m; ++i) {{ {body} }}\n}}\n")
    assert apply_transform("unroll_and_jam", src) is None
    reasons = jam_reasons(canonical(src, "f"), "f")
    assert reasons and why in reasons[0], reasons


def test_a_threaded_loop_with_an_undeclared_reduction_is_left_alone():
    # a race in the source (no reduction clause): not the jam's to keep or fix
    src = RUNNING.replace("    for (int64_t i = 0; i < m; ++i) {",
                          "#pragma omp parallel for\n    for (int64_t i = 0; i < m; ++i) {")
    assert apply_transform("unroll_and_jam", src) is None
    assert any("worksharing" in r for r in jam_reasons(src, "f"))


# rows added into one vector, the way a transposed mat-vec is written after interchange
# (the private-bins tests' kernel, `int` counters and a row pointer)
ROWS_INTO_Y = kernel(VECMAT, entry="vecmat")


def test_rows_added_into_a_vector_are_jammed_in_their_order(tmp_path):
    text = apply_transform("unroll_and_jam", ROWS_INTO_Y)
    assert text is not None and "jammed by 4" in text
    assert "omp simd\n" in text and "reduction" not in text  # no accumulator to reduce
    jammed, plain = build(text, tmp_path, "jammed"), build(ROWS_INTO_Y, tmp_path, "plain")
    rng = np.random.default_rng(7)
    for m, n in ((1, 1), (3, 9), (4, 16), (13, 37), (64, 200)):
        a = rng.standard_normal((m, n)).astype(np.float32)
        x = rng.standard_normal(m).astype(np.float32)
        got, want = (np.full(n, np.nan, np.float32) for _ in range(2))
        for lib, y in ((jammed, got), (plain, want)):
            lib.vecmat(ptr(a), ptr(x), ptr(y), ctypes.c_int64(m), ctypes.c_int64(n))
        assert np.allclose(got, x.astype(np.float64) @ a, rtol=1e-4, atol=1e-4), (m, n)
        # each y[j] receives the rows' terms in the same order as before
        assert np.array_equal(got, want), (m, n)


@pytest.mark.parametrize("old, new, why", [
    # the element a row updates moves with the row: rows overlap along y
    ("y[j] += row[j] * xi;", "y[i + j] += row[j] * xi;", "not independent"),
    # another element of y is read: a later row's update would be seen too early
    ("y[j] += row[j] * xi;", "y[j] += row[j] * xi * y[0];", "not independent"),
    # a scalar that the set-up reads and the wrap-up changes
    ("float xi = x[i];", "float xi = x[i] * g;", "g is carried by more than the set-up"),
])
def test_rows_into_a_vector_that_would_reorder_are_not_jammed(old, new, why):
    src = ROWS_INTO_Y.replace(old, new)
    if "g;" in new:
        src = src.replace("int m = (int)m_", "float g = 1.0f;\n    int m = (int)m_").replace(
            "y[j] += row[j] * xi;\n    }", "y[j] += row[j] * xi;\n        g *= 0.5f;\n    }")
    assert src != ROWS_INTO_Y
    assert apply_transform("unroll_and_jam", src) is None
    reasons = jam_reasons(canonical(src, "vecmat"), "vecmat")
    assert any(why in r for r in reasons), reasons


def test_rows_threaded_with_private_copies_are_then_jammed(tmp_path):
    # what the crew does to a transposed mat-vec: the row loop carries y, so omp_parallel
    # threads (and versions) the inner loop; private_bins threads the rows, each thread
    # adding into its own copy of y, and takes the serial version of the inner loop there
    # (a nested team would be one thread); the jam then adds four rows per pass
    threaded = apply_transform("omp_parallel", ROWS_INTO_Y)
    assert threaded is not None and threaded.count("if (n >= OMP_MIN_WORK)") == 2
    private = apply_transform("private_bins", threaded, {"extents": {"y": "n"}})
    assert private is not None and "reduction(+ : y[0:n])" in private
    region = private[private.index("private bins"):private.index("} else {",
                                                                 private.index("private bins"))]
    assert region.count("omp parallel") == 1 and "OMP_MIN_WORK)" not in region.split("\n", 1)[1]
    text = apply_transform("unroll_and_jam", private)
    assert text is not None and "jammed by 4" in text
    # the private-copies pragma stays on the jammed row loop
    assert re.search(r"reduction\(\+ : y\[0:n\]\)\n\s*for \(int i = 0; i < i_jam; i \+= 4\)",
                     text)
    lib = build(text.replace("1048576", "64"), tmp_path)  # thread from 64 multiply-adds
    rng = np.random.default_rng(9)
    for m, n in ((1, 1), (7, 9), (8, 16), (61, 130), (256, 300)):
        a = rng.standard_normal((m, n)).astype(np.float32)
        x = rng.standard_normal(m).astype(np.float32)
        y = np.full(n, np.nan, np.float32)
        lib.vecmat(ptr(a), ptr(x), ptr(y), ctypes.c_int64(m), ctypes.c_int64(n))
        assert np.allclose(y, x.astype(np.float64) @ a, rtol=1e-4, atol=1e-4), (m, n)


# ------------------------------------------------- one element added into by every copy

# column sums the way C writes them after interchange: every copy of the body adds a
# row into the same element of out
COLUMN_SUMS = kernel("""
extern "C" void f(const float* x, float* out, int64_t rows, int64_t cols) {
    int R = (int)rows, C = (int)cols;
    for (int c = 0; c < C; c++) out[c] = 0.0f;
    for (int r = 0; r < R; r++)
        for (int c = 0; c < C; c++) out[c] -= x[r * C + c];
}
""")


def test_copies_adding_into_one_element_become_one_statement_bit_for_bit(tmp_path):
    """`out[c] -= x[r*C+c]` four times becomes one load, four subtractions in the same
    order, one store: the result is the original's bit for bit (compiled without
    reassociation: -O3 does not reorder float additions)."""
    text = apply_transform("unroll_and_jam", COLUMN_SUMS)
    assert text is not None and "jammed by 4" in text
    assert re.search(r"out\[c\] = \(\(\(out\[c\] - \(x\[r \* C \+ c\]\)\) - "
                     r"\(x\[\(r \+ 1\) \* C \+ c\]\)\) - .*\) - \(x\[\(r \+ 3\) \* C \+ c\]\);",
                     text), text
    assert text.count("out[c] -=") == 1  # the leftover rows' loop keeps the original
    jammed, orig = build(text, tmp_path, "jam"), build(COLUMN_SUMS, tmp_path, "orig")
    rng = np.random.default_rng(9)
    for r, c in ((1, 1), (3, 5), (4, 8), (37, 100), (130, 17)):
        x = rng.standard_normal((r, c)).astype(np.float32)
        got, want = np.empty(c, np.float32), np.empty(c, np.float32)
        jammed.f(ptr(x), ptr(got), ctypes.c_int64(r), ctypes.c_int64(c))
        orig.f(ptr(x), ptr(want), ctypes.c_int64(r), ctypes.c_int64(c))
        assert np.array_equal(got, want), (r, c)


@pytest.mark.parametrize("stmt", [
    "out[c] += out[c] * x[r * C + c];",   # an added term reads the target: kept apart
    "out[c] += x[r * C + c]; out[c] *= 0.5f;",  # more than one statement
])
def test_bodies_that_cannot_be_folded_keep_one_statement_per_copy(stmt):
    src = COLUMN_SUMS.replace("out[c] -= x[r * C + c];", "{ " + stmt + " }")
    text = apply_transform("unroll_and_jam", src)
    assert text is not None and "jammed by 4" in text
    assert "out[c] = (" not in text
    assert text.count(stmt.split(";")[0] + ";") >= 2
