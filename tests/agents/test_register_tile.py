"""register_tile: a dot-product nest jammed together with the loop over rows around it, in
the styles matrix products are written in (a `collapse(2)` over batch and time with an
`int` row index, row pointers under a `parallel for`, a counter declared at the top), each
compiled and compared with NumPy at row and output counts below, at and above the tile;
and the nests where jamming the rows would be wrong or would share nothing."""

from __future__ import annotations

import ctypes
import re

import numpy as np
import pytest

from kernelcrew.agents.transforms import apply_transform
from kernelcrew.agents.transforms.catalogue import not_applicable
from kernelcrew.agents.transforms.cpu.register_tile import register_tile, tile_reasons
from tests.agents.test_reach import build, kernel, pragmas, ptr

# y = x @ w.T + bias over (batch, time) rows, the rows threaded by a collapse(2)
BATCHED = kernel("""
static void linear(float* out, const float* inp, const float* w, const float* bias,
                   int B, int T, int C, int OC) {
    #pragma omp parallel for collapse(2)
    for (int b = 0; b < B; b++) {
        for (int t = 0; t < T; t++) {
            int row = b * T + t;
            for (int o = 0; o < OC; o++) {
                float acc = (bias != NULL) ? bias[o] : 0.0f;
                for (int i = 0; i < C; i++) {
                    acc += inp[row * C + i] * w[o * C + i];
                }
                out[row * OC + o] = acc;
            }
        }
    }
}
extern "C" void f(const float* x, const float* w, const float* bias, float* y, int64_t B,
                  int64_t T, int64_t C, int64_t OC) {
    linear(y, x, w, bias, (int)B, (int)T, (int)C, (int)OC);
}
""", flags="[-O2, -fopenmp]")

# C = A @ B.T through row pointers, the rows under a plain parallel for; `long` counters
ROWPTR = kernel("""
extern "C" void f(const float* A, const float* Bt, float* Cm, long m, long n, long k) {
#pragma omp parallel for schedule(static)
    for (long i = 0; i < m; ++i) {
        const float* a = A + i * k;
        float* c = Cm + i * n;
        for (long j = 0; j < n; ++j) {
            const float* b = Bt + j * k;
            float s = 0.0f;
            for (long p = 0; p < k; ++p) s += a[p] * b[p];
            c[j] = 2.0f * s;
        }
    }
}
""", flags="[-O2, -fopenmp]")

# the counters declared at the top of the function, as older C does
TOPDECL = kernel("""
extern "C" void f(const float* A, const float* Bt, float* Cm, long m, long n, long k) {
    int i, j, p;
    int M = (int)m, N = (int)n, K = (int)k;
    for (i = 0; i < M; i++) {
        for (j = 0; j < N; j++) {
            float sum = 0;
            for (p = 0; p < K; p++) {
                sum += A[i * K + p] * Bt[j * K + p];
            }
            Cm[i * N + j] += sum;
        }
    }
}
""")


def _batched(lib, B, T, C, OC, rng, bias=True):
    x = rng.standard_normal((B, T, C)).astype(np.float32)
    w = rng.standard_normal((OC, C)).astype(np.float32)
    b = rng.standard_normal(OC).astype(np.float32)
    y = np.full((B, T, OC), np.nan, np.float32)
    lib.f(ptr(x), ptr(w), ptr(b) if bias else None, ptr(y), *map(ctypes.c_int64, (B, T, C, OC)))
    ref = x.astype(np.float64) @ w.T.astype(np.float64) + (b if bias else 0)
    assert np.allclose(y, ref, rtol=1e-4, atol=1e-4), (B, T, C, OC)


@pytest.mark.parametrize("rows, cols", [(8, 2), (8, 1), (4, 4), (3, 5)])
def test_a_collapsed_batch_and_time_nest_keeps_its_collapse(tmp_path, rows, cols):
    text = apply_transform("register_tile", BATCHED, {"rows": rows, "cols": cols})
    assert text is not None and f"rows jammed by {rows}" in text
    ps = pragmas(text)
    # the source's pragma on the groups of rows and again on the leftover rows
    assert ps.count("omp parallel for collapse(2)") == 2
    accs = rows * cols
    assert any(p.startswith("omp simd reduction(+ : acc, ") and p.count(",") == accs - 1
               for p in ps), ps
    lib = build(text, tmp_path, f"batched{rows}x{cols}")
    rng = np.random.default_rng(21)
    for B, T, C, OC in ((2, 16, 33, 10), (1, 1, 5, 3), (3, 7, 64, 17), (1, rows + 1, 8, cols),
                        (2, 2 * rows, 1, 2 * cols + 1)):
        _batched(lib, B, T, C, OC, rng)
    _batched(lib, 2, 9, 16, 5, rng, bias=False)


def test_row_pointers_under_a_parallel_for(tmp_path):
    text = apply_transform("register_tile", ROWPTR, {"rows": 4, "cols": 2})
    assert text is not None
    ps = pragmas(text)
    assert ps[0] == "omp parallel for schedule(static)"  # kept on the groups of rows
    assert "omp simd reduction(+ : s, s_c1, s_r1, s_r1c1, s_r2, s_r2c1, s_r3, s_r3c1)" in ps
    assert "const float* a_r3 = A + (i + 3) * k;" in text
    lib = build(text, tmp_path, "rowptr")
    rng = np.random.default_rng(22)
    for m, n, k in ((9, 5, 31), (4, 2, 1), (1, 1, 1), (3, 7, 16), (33, 64, 65)):
        a = rng.standard_normal((m, k)).astype(np.float32)
        bt = rng.standard_normal((n, k)).astype(np.float32)
        c = np.full((m, n), np.nan, np.float32)
        lib.f(ptr(a), ptr(bt), ptr(c), ctypes.c_long(m), ctypes.c_long(n), ctypes.c_long(k))
        assert np.allclose(c, 2 * a.astype(np.float64) @ bt.T, rtol=1e-4, atol=1e-4)


def test_counters_declared_at_the_top_and_an_update_of_the_output(tmp_path):
    """`Cm[...] += sum`: each output read and written by its own iteration only. The view
    with the counters moved into their loops is what the move applies to."""
    text = apply_transform("register_tile", TOPDECL, {"rows": 8, "cols": 2})
    assert text is not None and "rows jammed by 8" in text
    lib = build(text, tmp_path, "topdecl")
    rng = np.random.default_rng(23)
    for m, n, k in ((17, 5, 12), (8, 2, 3), (1, 1, 1), (7, 3, 40)):
        a = rng.standard_normal((m, k)).astype(np.float32)
        bt = rng.standard_normal((n, k)).astype(np.float32)
        c0 = rng.standard_normal((m, n)).astype(np.float32)
        c = c0.copy()
        lib.f(ptr(a), ptr(bt), ptr(c), ctypes.c_long(m), ctypes.c_long(n), ctypes.c_long(k))
        assert np.allclose(c, c0 + a.astype(np.float64) @ bt.T, rtol=1e-4, atol=1e-4)


# a dot-product matrix product as omp_parallel threads it: collapse(2) over rows and outputs
COLLAPSED_FIRST = kernel("""
extern "C" void f(const float* A, const float* Bt, float* Cm, long m, long n, long k) {
    int M = (int)m, N = (int)n, K = (int)k;
#pragma omp parallel for collapse(2) schedule(static)
    for (int i = 0; i < M; ++i) {
        for (int j = 0; j < N; ++j) {
            float s = 0.0f;
            for (int p = 0; p < K; ++p) s += A[i * K + p] * Bt[j * K + p];
            Cm[i * N + j] += s;
        }
    }
}
""", flags="[-O2, -fopenmp]")


def test_rows_and_outputs_under_one_collapse_are_tiled_with_the_groups_threaded(tmp_path):
    """omp_parallel collapses every perfect nest it threads; the tiled outputs are no longer
    one a collapse takes, so the groups of rows are threaded as they are and the leftover
    rows keep the collapse (before, the tile went to the untiled small-work path only)."""
    text = apply_transform("register_tile", COLLAPSED_FIRST, {"rows": 4, "cols": 4})
    assert text is not None and "rows jammed by 4, outputs by 4" in text
    ps = [p for p in pragmas(text) if p.startswith("omp parallel")]
    assert ps == ["omp parallel for schedule(static)",
                  "omp parallel for collapse(2) schedule(static)"], ps
    lib = build(text, tmp_path, "collapsedfirst")
    rng = np.random.default_rng(26)
    for m, n, k in ((9, 7, 31), (4, 4, 1), (1, 1, 1), (3, 5, 16), (33, 64, 65), (8, 3, 2)):
        a = rng.standard_normal((m, k)).astype(np.float32)
        bt = rng.standard_normal((n, k)).astype(np.float32)
        c0 = rng.standard_normal((m, n)).astype(np.float32)
        c = c0.copy()
        lib.f(ptr(a), ptr(bt), ptr(c), ctypes.c_long(m), ctypes.c_long(n), ctypes.c_long(k))
        assert np.allclose(c, c0 + a.astype(np.float64) @ bt.T, rtol=1e-4, atol=1e-4), (m, n, k)


def test_a_collapse_with_a_clause_the_groups_cannot_keep_is_refused():
    src = COLLAPSED_FIRST.replace("collapse(2) schedule(static)",
                                  "collapse(2) schedule(static) ordered")
    assert register_tile(src.split("*/", 1)[1], "f") is None


@pytest.mark.parametrize("body, why", [
    # each row reads the row above it: the rows are not independent
    (("for (int j = 0; j < n; j++) { float s = 0; for (int p = 0; p < k; p++) "
     "s += A[i * k + p] * Bt[j * k + p]; Cm[i * n + j] = s + (i ? Cm[(i - 1) * n + j] : 0); }"),
     "not independent"),
    # a causal nest: the outputs of row i run to i, so the tile's rows have other bounds
    (("for (int j = 0; j <= i; j++) { float s = 0; for (int p = 0; p < k; p++) "
     "s += A[i * k + p] * Bt[j * k + p]; Cm[i * n + j] = s; }"), "change with i"),
    # every read depends on the row: the rows share nothing
    (("for (int j = 0; j < n; j++) { float s = 0; for (int p = 0; p < k; p++) "
     "s += A[i * k + p] * A[i * k + p] * (float)j; Cm[i * n + j] = s; }"), "share nothing"),
])
def test_row_loops_that_must_not_be_jammed_are_refused_with_the_reason(body, why):
    src = ("extern \"C\" void f(const float* A, const float* Bt, float* Cm, int m, int n, "
           f"int k) {{\n    for (int i = 0; i < m; i++) {{\n        {body}\n    }}\n}}\n")
    assert register_tile(src, "f") is None
    reasons = tile_reasons(src, "f")
    assert any(why in r for r in reasons), reasons
    assert why in not_applicable(kernel(src))["register_tile"]


# leading dimensions as parameters, BLAS-style (C += alpha * A @ B.T)
STRIDED = kernel("""
extern "C" void f(const float* A, const float* Bt, float* Cm, float alpha, long m_, long n_,
                  long k_, long lda_, long ldb_, long ldc_) {
    int M = (int)m_, N = (int)n_, K = (int)k_, lda = (int)lda_, ldb = (int)ldb_;
    int ldc = (int)ldc_;
    for (int i = 0; i < M; ++i) {
        for (int j = 0; j < N; ++j) {
            float sum = 0;
            for (int p = 0; p < K; ++p) sum += alpha * A[i * lda + p] * Bt[j * ldb + p];
            Cm[i * ldc + j] += sum;
        }
    }
}
""")


def test_leading_dimensions_are_tested_before_the_tile(tmp_path):
    """Rows of C are disjoint only when ldc >= N: the tile runs under that test, the code
    as it was otherwise (rows that overlap then add up in the original order)."""
    text = apply_transform("register_tile", STRIDED, {"rows": 4, "cols": 2})
    # the row's span read as the loop bound or as the size it is narrowed from
    assert text is not None and re.search(r"if \(\(ldc >= (N|n_)\)\) \{", text)
    lib = build(text, tmp_path, "strided")
    rng = np.random.default_rng(24)
    for m, n, k, lda, ldb, ldc in ((9, 5, 7, 9, 7, 8), (4, 2, 3, 3, 3, 2), (6, 6, 4, 4, 4, 3),
                                   (5, 3, 2, 2, 2, 1)):
        a = rng.standard_normal(m * lda).astype(np.float32)
        bt = rng.standard_normal(n * ldb).astype(np.float32)
        c = rng.standard_normal((m - 1) * ldc + n).astype(np.float32)
        want = c.astype(np.float64)
        for i in range(m):  # the original loop order, overlapping rows and all
            for j in range(n):
                want[i * ldc + j] += 0.5 * float(np.dot(a[i * lda:i * lda + k].astype(np.float64),
                                                        bt[j * ldb:j * ldb + k]))
        lib.f(ptr(a), ptr(bt), ptr(c), ctypes.c_float(0.5), *map(ctypes.c_long,
                                                                 (m, n, k, lda, ldb, ldc)))
        assert np.allclose(c, want, rtol=1e-4, atol=1e-4), (m, n, ldc)


# the i-k-j order with leading dimensions and the counters at the top (C += alpha * A @ B)
IKJ = kernel("""
extern "C" void f(const float* A, const float* Bm, float* Cm, float alpha, long m_, long n_,
                  long k_, long lda_, long ldb_, long ldc_) {
    int M = (int)m_, N = (int)n_, K = (int)k_, lda = (int)lda_, ldb = (int)ldb_;
    int ldc = (int)ldc_;
    int i, j, p;
    for (i = 0; i < M; ++i) {
        for (p = 0; p < K; ++p) {
            float a = alpha * A[i * lda + p];
            for (j = 0; j < N; ++j) {
                Cm[i * ldc + j] += a * Bm[p * ldb + j];
            }
        }
    }
}
""")


def test_register_block_of_an_ikj_nest_with_leading_dimensions(tmp_path):
    """The blocked rows run under `ldc >= N`, once (the code as it was is not blocked
    again); overlapping rows take the original order."""
    text = apply_transform("register_block", IKJ)
    assert text is not None and text.count("// kernelcrew: the code as it was") == 1
    assert re.search(r"if \(\(ldc >= (N|n_)\)\) \{", text)
    lib = build(text, tmp_path, "ikj")
    rng = np.random.default_rng(25)
    for m, n, k, lda, ldb, ldc in ((9, 37, 7, 8, 40, 37), (4, 16, 3, 3, 16, 20), (1, 1, 1, 1, 1, 1),
                                   (6, 6, 4, 4, 6, 3)):
        a = rng.standard_normal(m * lda).astype(np.float32)
        bm = rng.standard_normal(k * ldb).astype(np.float32)
        c = rng.standard_normal((m - 1) * ldc + n).astype(np.float32)
        want = c.astype(np.float64)
        for i in range(m):
            for p in range(k):
                want[i * ldc:i * ldc + n] += 0.5 * float(a[i * lda + p]) * bm[p * ldb:p * ldb + n]
        lib.f(ptr(a), ptr(bm), ptr(c), ctypes.c_float(0.5), *map(ctypes.c_long,
                                                                 (m, n, k, lda, ldb, ldc)))
        assert np.allclose(c, want, rtol=1e-4, atol=1e-4), (m, n, ldc)
