"""Counters declared at the top of a function (C89 style: `int i, j, k;` then
`for (i = 0; ...)`), and inputs an imported entry hands on through `const_cast`: the moves
see through both, and are refused where the rewrite would change what the code does."""

from __future__ import annotations

import ctypes

import numpy as np

from kernelcrew.agents.transforms import apply_transform
from kernelcrew.agents.transforms.analysis.scope import scope_of
from kernelcrew.agents.transforms.views.loop_counters import scope_counters
from kernelcrew.csource.syntax import Source
from tests.agents.test_reach import build, kernel, pragmas, ptr

# per-channel variance of an NCHW-like tensor, counters at the top, no const anywhere
CHANNEL_VAR = kernel("""
static void channel_var(float *x, float *mu, int n, int c, int hw, float *var)
{
    int b, ch, p;
    float norm = 1.0f / (n * hw - 1);
    for (ch = 0; ch < c; ++ch) {
        var[ch] = 0;
        for (b = 0; b < n; ++b) {
            for (p = 0; p < hw; ++p) {
                int at = b * c * hw + ch * hw + p;
                var[ch] += powf(x[at] - mu[ch], 2);
            }
        }
        var[ch] *= norm;
    }
}

extern "C" void f(const float* x, const float* mu, float* var, int64_t n, int64_t c,
                  int64_t hw) {
    channel_var(const_cast<float*>(x), const_cast<float*>(mu), (int)n, (int)c, (int)hw, var);
}
""", flags="[-O2]")


def test_counters_move_into_their_loops_and_the_helper_is_threaded(tmp_path):
    body = CHANNEL_VAR.split("*/\n", 1)[1]
    view = scope_counters(body, "channel_var")
    assert view is not None
    for loop in ("for (int ch = 0;", "for (int b = 0;", "for (int p = 0;"):
        assert loop in view
    # the helper is in reach through the entry's const_casts
    assert scope_of(Source(body), "f").functions == ["f", "channel_var"]
    out = apply_transform("omp_parallel", CHANNEL_VAR)
    assert out is not None and any("parallel for" in p for p in pragmas(out))
    # and computes what the original does
    rng = np.random.default_rng(0)
    n, c, hw = 3, 5, 700
    x = rng.standard_normal(n * c * hw).astype(np.float32)
    mu = rng.standard_normal(c).astype(np.float32)
    want = np.empty(c, np.float32)
    got = np.empty(c, np.float32)
    for text, res, name in ((CHANNEL_VAR, want, "orig"), (out, got, "omp")):
        build(text, tmp_path, name).f(ptr(x), ptr(mu), ptr(res), ctypes.c_int64(n),
                                      ctypes.c_int64(c), ctypes.c_int64(hw))
    assert np.allclose(got, want, rtol=1e-6)


def test_a_counter_used_outside_its_loops_stays_where_it_is():
    after = kernel("""
extern "C" void f(const float* x, float* y, int64_t n) {
    int i;
    for (i = 0; i < n; ++i) y[i] = x[i];
    y[0] = (float)i;  /* the value the loop left */
}
""").split("*/\n", 1)[1]
    assert scope_counters(after, "f") is None
    carried = kernel("""
extern "C" void f(const float* x, float* y, int64_t n) {
    int i = 0, j;
    for (j = 0; j < n; ++j) y[j] = x[j];
    for (; i < n; ++i) y[i] += 1.0f;  /* no initializer: the value flows in */
    for (j = j - n; j < n; ++j) y[j] *= 2.0f;  /* reads the value before the loop */
}
""").split("*/\n", 1)[1]
    assert scope_counters(carried, "f") is None
    address = kernel("""
static void next(int* k) { *k += 1; }
extern "C" void f(const float* x, float* y, int64_t n) {
    int k;
    for (k = 0; k < n; next(&k)) y[k] = x[k];
}
""").split("*/\n", 1)[1]
    assert scope_counters(address, "f") is None


def test_const_cast_does_not_hide_overlapping_buffers():
    """Seeing through the cast must not make two views of one buffer distinct."""
    body = kernel("""
static void shift(float *dst, float *src, int n) {
    int i;
    for (i = 0; i < n; ++i) dst[i] = src[i];
}
extern "C" void f(const float* x, float* y, int64_t n) {
    shift(y, const_cast<float*>(y) + 1, (int)n - 1);
}
""").split("*/\n", 1)[1]
    sc = scope_of(Source(body), "f")
    assert sc.functions == ["f"] and "shift" in sc.excluded
    assert "y" in sc.excluded["shift"]


# ---------------------------------------------------------------- array accumulators

def _body(text: str) -> str:
    return text.split("*/\n", 1)[1]


def test_an_output_element_summed_into_is_kept_in_a_local_and_then_vectorized(tmp_path):
    from kernelcrew.agents.transforms.views.scalarize import scalarize
    body = _body(CHANNEL_VAR)
    view = scalarize(scope_counters(body, "channel_var"), "channel_var")
    assert view is not None
    # the store of 0 right before the loop is dead (the element is stored from the local
    # after it): the local starts at 0
    assert "float var_acc = 0;" in view and "var_acc += powf(" in view
    assert "var[ch] = var_acc;" in view and "var[ch] = 0;" not in view
    # the moves that need a scalar reduction now apply to the source as written
    for move in ("accumulators", "simd"):
        out = apply_transform(move, CHANNEL_VAR)
        assert out is not None, move
    rng = np.random.default_rng(2)
    n, c, hw = 2, 3, 513
    x = rng.standard_normal(n * c * hw).astype(np.float32)
    mu = rng.standard_normal(c).astype(np.float32)
    res = {}
    for name, text in (("orig", CHANNEL_VAR), ("acc", apply_transform("accumulators",
                                                                        CHANNEL_VAR))):
        res[name] = np.empty(c, np.float32)
        build(text, tmp_path, name).f(ptr(x), ptr(mu), ptr(res[name]), ctypes.c_int64(n),
                                      ctypes.c_int64(c), ctypes.c_int64(hw))
    assert np.allclose(res["acc"], res["orig"], rtol=1e-5)


def test_array_accumulators_are_left_alone_where_the_element_is_not_fixed():
    from kernelcrew.agents.transforms.views.scalarize import scalarize
    cases = {
        "the subscript moves in the loop": """
extern "C" void f(const float* x, float* y, int64_t n) {
    for (int64_t i = 0; i < n; ++i)
        for (int64_t j = 0; j < n; ++j) y[j] += x[i * n + j];
}""",
        "two elements of the array": """
extern "C" void f(const float* x, float* y, int64_t n) {
    for (int64_t i = 1; i < n; ++i)
        for (int64_t j = 0; j < n; ++j) y[i] += y[i - 1] * x[j];
}""",
        "a local pointer, which may alias": """
extern "C" void f(const float* x, float* y, int64_t n) {
    float* out = y;
    for (int64_t i = 0; i < n; ++i)
        for (int64_t j = 0; j < n; ++j) out[i] += x[i * n + j];
}""",
        "a return inside the loop": """
extern "C" void f(const float* x, float* y, int64_t n) {
    for (int64_t i = 0; i < n; ++i)
        for (int64_t j = 0; j < n; ++j) { if (x[j] < 0) return; y[i] += x[i * n + j]; }
}""",
        "a pragma on the loop": """
extern "C" void f(const float* x, float* y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) {
        #pragma omp parallel for
        for (int64_t j = 0; j < n; ++j) y[i] += x[i * n + j];
    }
}""",
        "the index changes in the loop": """
extern "C" void f(const float* x, float* y, int64_t n) {
    int64_t k = 0;
    for (int64_t i = 0; i < n; ++i) { y[k] += x[i]; k = i / 2; }
}""",
    }
    for why, src in cases.items():
        assert scalarize(_body(kernel(src)), "f") is None, why


# ---------------------------------------------------------------- leading dimensions

SGEMM = kernel("""
static void sgemm_nn(int m, int n, int k, float alpha, float *a, int lda, float *b, int ldb,
                     float *c, int ldc)
{
    int i, j, p;
    for (i = 0; i < m; ++i) {
        for (p = 0; p < k; ++p) {
            float t = alpha * a[i * lda + p];
            for (j = 0; j < n; ++j) c[i * ldc + j] += t * b[p * ldb + j];
        }
    }
}

extern "C" void f(const float* a, const float* b, float* c, int64_t m, int64_t n, int64_t k,
                  int64_t lda, int64_t ldb, int64_t ldc) {
    sgemm_nn((int)m, (int)n, (int)k, 1.0f, const_cast<float*>(a), (int)lda,
             const_cast<float*>(b), (int)ldb, c, (int)ldc);
}
""")


def test_rows_strided_by_a_leading_dimension_are_threaded_under_a_run_time_test(tmp_path):
    """`c[i * ldc + j]` is one element per (i, j) only when ldc >= n, which the code does not
    say: the threaded copy runs when the test holds, the original otherwise (rows that
    overlap, ldc < n, are legal C and keep their serial order)."""
    out = apply_transform("omp_parallel", SGEMM)
    assert out is not None
    assert "(ldc >= n)" in out and "#pragma omp parallel for" in out
    # the moves that need distinct rows are not offered on the assumption: the jam takes
    # the k steps of one row (four rows of b added into the row of c per pass, each
    # element's terms in their order, whatever ldc is), never the rows themselves
    jammed = apply_transform("unroll_and_jam", SGEMM)
    assert jammed is not None and "for (int p = 0; p < p_jam; p += 4)" in jammed
    assert "i_jam" not in jammed
    rng = np.random.default_rng(3)
    lib0, lib1 = build(SGEMM, tmp_path, "orig"), build(out, tmp_path, "omp")
    lib2 = build(jammed, tmp_path, "jam")
    # m * n * k above the threaded copy's work threshold (OMP_MIN_WORK, 2^20) in every case
    for m, n, k, ldc in ((128, 96, 100, 96), (128, 96, 100, 100), (128, 96, 100, 48)):
        a = rng.standard_normal(m * k).astype(np.float32)
        b = rng.standard_normal(k * n).astype(np.float32)
        c0 = rng.standard_normal(m * ldc + n).astype(np.float32)
        got = {}
        for name, lib in (("orig", lib0), ("omp", lib1), ("jam", lib2)):
            c = c0.copy()
            lib.f(ptr(a), ptr(b), ptr(c), *(ctypes.c_int64(v) for v in (m, n, k, k, n, ldc)))
            got[name] = c
        # same operations per element in the same order: equal bit for bit
        assert np.array_equal(got["omp"], got["orig"]), (m, n, k, ldc)
        assert np.array_equal(got["jam"], got["orig"]), (m, n, k, ldc)
