"""Unroll-and-jam of a row loop that is threaded: a `parallel for` already on the loop stays
on the jammed loop (OpenMP's canonical form, the leftover rows on the calling thread), a
pragma whose meaning would change refuses the jam, and a merge threads the rows before it
jams them (a loop that steps by 4 cannot be threaded afterwards)."""

from __future__ import annotations

import ctypes
import re

import numpy as np
import pytest

from kernelcrew.agents.coordinator import apply_order, coordinate
from kernelcrew.agents.transforms import apply_change, apply_transform
from kernelcrew.agents.transforms.cpu.unroll_and_jam import jam_reasons, unroll_and_jam
from tests.agents.test_reach import build, kernel, pragmas, ptr
from tests.agents.test_specialists import all_proposals, ctx_for

# GEMV as inference code writes it (rows split by a pragma, `int` counters, a row pointer)
ROWS = """
extern "C" void f(const float* A, const float* x, float* y, long m, long n) {
    int M = (int)m, N = (int)n;
#pragma omp parallel for%s
    for (int i = 0; i < M; i++) {
        const float* row = A + (long)i * N;
        float sum = 0.0f;
        for (int j = 0; j < N; j++) {
            sum += row[j] * x[j];
        }
        y[i] = sum;
    }
}
"""


def gemv(lib, m: int, n: int, rng) -> None:
    a = rng.standard_normal((m, n)).astype(np.float32)
    x = rng.standard_normal(n).astype(np.float32)
    y = np.full(m, np.nan, np.float32)
    lib.f(ptr(a), ptr(x), ptr(y), ctypes.c_long(m), ctypes.c_long(n))
    assert np.allclose(y, a.astype(np.float64) @ x, rtol=1e-4, atol=1e-4), (m, n)


@pytest.mark.parametrize("clauses", ["", " schedule(static)", " schedule(dynamic, 4) num_threads(2)"])
def test_a_parallel_for_on_the_rows_stays_on_the_jammed_loop(tmp_path, clauses):
    text = apply_transform("unroll_and_jam", kernel(ROWS % clauses))
    assert text is not None and "jammed by 4" in text
    assert pragmas(text) == [f"omp parallel for{clauses}",
                             "omp simd reduction(+ : sum, sum_1, sum_2, sum_3)"]
    # canonical for OpenMP: the pragma right on `for (int i = 0; i < i_jam; i += 4)`
    assert re.search(rf"#pragma omp parallel for{re.escape(clauses)}\n\s*"
                     r"for \(int i = 0; i < i_jam; i \+= 4\)", text)
    assert "-fopenmp" in text
    lib = build(text, tmp_path)
    rng = np.random.default_rng(11)
    for m, n in ((1, 5), (3, 17), (4, 8), (7, 33), (67, 129)):  # below, at, above 4 rows
        gemv(lib, m, n, rng)


@pytest.mark.parametrize("pragma, why", [
    ("omp parallel for reduction(+ : t)", "reduction"),
    ("omp parallel for private(t)", "private"),
    ("omp parallel for private(i, t)", "private"),
    ("omp parallel for ordered", "ordered"),
    ("omp for", "for"),
])
def test_a_pragma_whose_meaning_would_change_refuses_the_jam(pragma, why):
    src = ROWS.replace("#pragma omp parallel for%s", f"#pragma {pragma}") \
        .replace("int M = (int)m", "float t = 0.0f;\n    int M = (int)m")
    assert unroll_and_jam(src, "f") is None
    reasons = jam_reasons(src, "f")
    assert any("carries an OpenMP pragma the jam cannot keep" in r and why in r
               for r in reasons), reasons


def test_an_inclusive_bound_and_a_counter_declared_before_the_loop(tmp_path):
    src = kernel("""
extern "C" void f(const float* A, const float* x, float* y, long m, long n) {
    long i;
#pragma omp parallel for schedule(static)
    for (i = 1; i <= m; i++) {
        float s = 0.0f;
        for (long j = 0; j < n; j++) s += A[(i - 1) * n + j] * x[j];
        y[i - 1] = s;
    }
}
""")
    text = apply_transform("unroll_and_jam", src)
    # the counter declared in the loop by the view every loop move reads first (no value
    # flows into or out of the loop through it), or left where it was
    assert text is not None and re.search(r"for \((long )?i = 1; i < i_jam; i \+= 4\)", text)
    assert "const long i_jam = m >= 1 ? 1 + (m - 1 + 1) / 4 * 4 : 1;" in text
    lib = build(text, tmp_path)
    rng = np.random.default_rng(12)
    for m, n in ((1, 3), (2, 9), (4, 4), (5, 31), (66, 70)):
        gemv(lib, m, n, rng)


def test_llama2c_matmul_as_written_is_jammed_and_stays_correct(tmp_path):
    """llama2.c's `matmul` (karpathy/llama2.c, run.c) as it is written there: the counter
    declared before the loop, `private(i)` on the rows' `parallel for`, no const."""
    src = kernel("""
void matmul(float* xout, float* x, float* w, int n, int d) {
    int i;
    #pragma omp parallel for private(i)
    for (i = 0; i < d; i++) {
        float val = 0.0f;
        for (int j = 0; j < n; j++) {
            val += w[i * n + j] * x[j];
        }
        xout[i] = val;
    }
}
extern "C" void f(const float* A, const float* x, float* y, long m, long n) {
    matmul(y, (float*)x, (float*)A, (int)n, (int)m);
}
""")
    text = apply_transform("unroll_and_jam", src)
    assert text is not None and "jammed by 4" in text
    assert re.search(r"#pragma omp parallel for private\(i\)\n\s*for \((int )?i = 0; i < i_jam; "
                     r"i \+= 4\)", text), text
    lib = build(text, tmp_path)
    rng = np.random.default_rng(13)
    for m, n in ((1, 5), (3, 17), (4, 8), (7, 33), (67, 129)):
        gemv(lib, m, n, rng)


def test_a_merge_threads_the_rows_before_it_jams_them(tmp_path):
    """qmatvec's heuristic proposals ranked as the specialists rank them (the jam first):
    the merge applies the threads first, so the jammed loop carries the `parallel for`."""
    ctx = ctx_for("qmatvec")
    props = all_proposals(ctx)
    kinds = [p.change.kind for p in props]
    assert {"unroll_and_jam", "omp_parallel"} <= set(kinds)
    ordered = [p.change.kind for p in apply_order(props)]
    assert ordered.index("omp_parallel") < ordered.index("unroll_and_jam")
    assert sorted(ordered) == sorted(kinds)
    decision = coordinate(props, ctx.kernel, apply=lambda p, t: apply_change(p.change, t))
    merged = decision.candidates[0]
    assert {"unroll_and_jam", "omp_parallel"} <= set(merged.change.kind.split("+"))
    assert re.search(r"#pragma omp parallel for[^\n]*\n\s*for \(int64_t i = 0; i < i_jam; "
                     r"i \+= 4\)", merged.change.kernel), merged.change.kernel
    lib = build(merged.change.kernel, tmp_path, "qm")
    rng = np.random.default_rng(13)
    for m, n in ((3, 7), (1030, 1031)):  # the serial and the threaded version, with leftovers
        w = rng.integers(-127, 128, (m, n)).astype(np.int32)
        x = rng.integers(-127, 128, n).astype(np.int32)
        scale = rng.random(m).astype(np.float32)
        y = np.full(m, np.nan, np.float32)
        lib.qmatvec(ptr(w), ptr(x), ptr(scale), ptr(y), ctypes.c_int64(m), ctypes.c_int64(n))
        want = scale.astype(np.float64) * (w.astype(np.int64) @ x)
        assert np.allclose(y, want, rtol=1e-5), (m, n)


def test_two_row_loops_in_one_function_are_both_jammed(tmp_path):
    """Each jammed loop gets its own bound's name (the second does not reuse the first's;
    its accumulator has another name, as copies of one name in two nests are refused)."""
    src = kernel("""
extern "C" void f(const float* A, const float* x, float* y, long m, long n) {
    for (long i = 0; i < m; i++) {
        float s = 0.0f;
        for (long j = 0; j < n; j++) s += A[i * n + j] * x[j];
        y[i] = s;
    }
    for (long i = 0; i < m; i++) {
        float t = 0.0f;
        for (long j = 0; j < n; j++) t += A[i * n + j] * x[j];
        y[i] = 0.5f * (y[i] + t);
    }
}
""")
    text = apply_transform("unroll_and_jam", src)
    assert text is not None and text.count("jammed by 4") == 2
    assert "i < i_jam;" in text and "i < i_jam1;" in text
    lib = build(text, tmp_path)
    rng = np.random.default_rng(14)
    for m, n in ((3, 5), (9, 40)):
        gemv(lib, m, n, rng)
