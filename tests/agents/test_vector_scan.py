"""vector_scan: prefix sums a vector at a time (the prefix of 8 floats or 4 doubles taken
in registers), in several styles: the library's pointer walk, a helper with `int` counters
and `s = s + v`, an in-place double scan, a C89 counter, and every copy the blocked scan
leaves. Each result compiled and compared with NumPy on lengths around the vector width;
the loops where it would be wrong (an exclusive scan, an integer sum, other work in the
loop, a carried dependence, the running sum read otherwise, a helper called on
overlapping rows) left alone, with the reason."""

from __future__ import annotations

import ctypes
import subprocess

import numpy as np
import pytest

from kernelcrew.agents.coordinator import apply_order, coordinate
from kernelcrew.agents.transforms import apply_change, apply_transform, parse_any
from kernelcrew.agents.transforms.catalogue import not_applicable
from tests.agents.conftest import baseline_text
from tests.agents.test_reach import build, kernel, ptr
from tests.agents.test_specialists import all_proposals, ctx_for

SHAPES = ((3, 1), (2, 7), (4, 8), (3, 17), (5, 1000), (1, 4099))


def _rows_cumsum(lib, x: np.ndarray) -> np.ndarray:
    y = np.full_like(x, np.nan)
    rows, cols = x.shape
    lib.cumsum_rows(ptr(x), ptr(y), ctypes.c_int64(rows), ctypes.c_int64(cols))
    return y


def _ref(x: np.ndarray) -> np.ndarray:
    return np.cumsum(x.astype(np.float64), axis=1)


@pytest.mark.parametrize("blocked_first", [False, True])
def test_the_library_row_scan_walked_with_pointers(blocked_first, tmp_path):
    text = baseline_text("cumsum_rows")
    if blocked_first:  # the order of a merge: the blocked scan, then every copy vectorized
        text = apply_transform("blocked_scan", text)
        assert text is not None
    out = apply_transform("vector_scan", text)
    assert out is not None
    assert out.count("// kernelcrew: vector scan") == (4 if blocked_first else 1)
    assert "__builtin_shuffle" in out
    flags = "-fopenmp" in out or blocked_first
    lib = build(out.replace("flags: [-O2]", "flags: [-O2, -fopenmp]") if flags else out,
                tmp_path)
    rng = np.random.default_rng(3)
    shapes = SHAPES + ((40, 30000), (2, 70001)) if blocked_first else SHAPES
    for rows, cols in shapes:
        x = rng.standard_normal((rows, cols)).astype(np.float32)
        got = _rows_cumsum(lib, x)
        assert np.allclose(got, _ref(x), rtol=1e-4, atol=1e-3 * np.sqrt(cols)), (rows, cols)
    # vector-scanned loops are no longer a blocked scan's to split: the leftover loops stay
    assert apply_transform("blocked_scan", out) is None


HELPER = kernel("""
static void prefix(const float* in, float* out, int n) {
    float s = 0.0f;
    for (int i = 0; i < n; i++) {
        s = s + in[i] * 0.5f;
        out[i] = s;
    }
}
extern "C" void cumsum_rows(const float* x, float* y, int64_t rows, int64_t cols) {
    for (int64_t r = 0; r < rows; ++r) prefix(x + r * cols, y + r * cols, (int)cols);
}
""", entry="cumsum_rows")


def _build_sse(text: str, tmp_path):
    """The body compiled for plain x86-64 (SSE2, no AVX): the 16-byte vectors' copy."""
    src = tmp_path / "sse.cpp"
    src.write_text(parse_any(text).body)
    lib = tmp_path / "sse.so"
    subprocess.run(["g++", "-O2", "-march=x86-64", "-shared", "-fPIC", str(src), "-o",
                    str(lib)], check=True, capture_output=True)
    return ctypes.CDLL(str(lib))


@pytest.mark.parametrize("isa", ["native", "x86-64"])
def test_a_helper_with_int_counters(isa, tmp_path):
    # a scaled value goes through the lane buffer; plain x86-64 takes the 16-byte vectors
    out = apply_transform("vector_scan", HELPER)
    assert out is not None and "const int i = (int)(kc_sk + kc_sl);" in out
    assert "vector_size(16)" in out and "#if defined(__AVX__)" in out
    lib = build(out, tmp_path) if isa == "native" else _build_sse(out, tmp_path)
    rng = np.random.default_rng(5)
    for rows, cols in SHAPES:
        x = rng.standard_normal((rows, cols)).astype(np.float32)
        assert np.allclose(_rows_cumsum(lib, x), 0.5 * _ref(x), rtol=1e-4,
                           atol=1e-3 * np.sqrt(cols))


IN_PLACE = kernel("""
extern "C" void f(double* y, double base, int64_t n) {
    double acc = base;
    size_t j;
    for (j = 0; j < (size_t)n; j++) {
        acc -= y[j];
        y[j] = acc;
    }
    y[0] += (double)j - (double)n;  /* the counter's final value is read after the loop */
}
""")


def test_an_in_place_double_scan_with_a_c89_counter(tmp_path):
    out = apply_transform("vector_scan", IN_PLACE)
    assert out is not None
    assert "typedef double kc_sv __attribute__((vector_size(32)));" in out
    assert "for (j = (size_t)(kc_sk); j < (size_t)n; ++j)" in out
    lib = build(out, tmp_path)
    rng = np.random.default_rng(9)
    for n in (1, 3, 4, 5, 64, 1001):
        y = rng.standard_normal(n)
        want = 2.0 - np.cumsum(y)
        lib.f(ptr(y), ctypes.c_double(2.0), ctypes.c_int64(n))
        assert np.allclose(y, want, rtol=1e-12, atol=1e-12), n


@pytest.mark.parametrize("body, why", [
    # an exclusive scan: the store comes first
    ("float s = 0.0f; for (int i = 0; i < n; i++) { y[i] = s; s += x[i]; }",
     "does not open with its update"),
    # an integer sum: exact, but not this move's (no float lanes)
    ("int s = 0; for (int i = 0; i < n; i++) { s += (int)x[i]; y[i] = (float)s; }",
     "is read at line"),
    ("long s = 0; for (int i = 0; i < n; i++) { s += (long)x[i]; z[i] = s; }",
     "not a float or a double"),
    # other work in the loop
    ("float s = 0.0f; for (int i = 0; i < n; i++) { s += x[i]; y[i] = s; x[i] = 0.0f; }",
     "does other work"),
    # a loop-carried dependence through memory, not a running sum
    ("for (int i = 1; i < n; i++) y[i] = y[i - 1] + x[i];", None),
    # the running sum read other than by a store
    ("float s = 0.0f; for (int i = 0; i < n; i++) { s += x[i]; y[i] = 2.0f * s; }",
     "other than by a store"),
])
def test_loops_it_must_leave_alone(body, why):
    text = kernel(f'extern "C" void f(float* x, float* y, long* z, int n) {{\n    {body}\n}}\n')
    assert apply_transform("vector_scan", text) is None
    reason = not_applicable(text)["vector_scan"]
    if why is not None:
        assert why in reason, reason


def test_a_helper_called_on_overlapping_rows_is_left_alone():
    # prefix(y, y + 1): each element read is the one the iteration before wrote (the same
    # helper on two buffers is HELPER's case above)
    text = kernel("""
static void prefix(const float* in, float* out, int n) {
    float s = 0.0f;
    for (int i = 0; i < n; i++) { s += in[i]; out[i] = s; }
}
extern "C" void f(float* y, int64_t n) {
    prefix(y, y + 1, (int)n - 1);
}
""")
    assert apply_transform("vector_scan", text) is None
    assert "passes the buffer y twice" in not_applicable(text)["scope"]


def test_a_merge_threads_and_blocks_the_rows_before_it_vectorizes_them(tmp_path):
    """cumsum_rows' heuristic proposals as the specialists rank them: the merge applies
    the threads and the blocked scan first (the thread analysis does not read a
    vector-scanned loop), then vectorizes every copy of the scan."""
    ctx = ctx_for("cumsum_rows")
    props = all_proposals(ctx)
    kinds = [p.change.kind for p in props]
    assert {"vector_scan", "blocked_scan", "omp_parallel"} <= set(kinds)
    ordered = [p.change.kind for p in apply_order(props)]
    assert ordered.index("omp_parallel") < ordered.index("vector_scan")
    assert ordered.index("blocked_scan") < ordered.index("vector_scan")
    decision = coordinate(props, ctx.kernel, apply=lambda p, t: apply_change(p.change, t))
    merged = decision.candidates[0]
    assert {"vector_scan", "blocked_scan", "omp_parallel"} <= set(merged.change.kind.split("+"))
    text = merged.change.kernel
    assert text.count("// kernelcrew: vector scan") >= 3 and "#pragma omp parallel" in text
    lib = build(text, tmp_path)
    rng = np.random.default_rng(11)
    for rows, cols in ((3, 5), (40, 30000), (2, 70001)):  # serial, rows, blocks
        x = rng.standard_normal((rows, cols)).astype(np.float32)
        assert np.allclose(_rows_cumsum(lib, x), _ref(x), rtol=1e-4,
                           atol=1e-3 * np.sqrt(cols)), (rows, cols)


ROW_POINTERS = kernel("""
extern "C" void cumsum_rows(const float* x, float* y, int64_t rows, int64_t cols) {
    int n = (int)cols;
    for (int r = 0; r < (int)rows; r++) {
        const float* xr = x + (size_t)r * n;
        float* yr = y + (size_t)r * n;
        float s = 0.0f;
#pragma GCC unroll 4
        for (int j = 0; j < n; j++) {
            s += xr[j];
            yr[j] = s;
        }
    }
}
""", entry="cumsum_rows")


def test_row_pointers_and_an_existing_pragma(tmp_path):
    # the rows reached through pointers, the sizes narrowed to int, a pragma already there
    out = apply_transform("vector_scan", ROW_POINTERS)
    assert out is not None and "#pragma GCC unroll" not in out
    assert "__builtin_memcpy(&kc_sv8, &(xr[j]), sizeof kc_sv8);" in out
    lib = build(out, tmp_path)
    rng = np.random.default_rng(17)
    for rows, cols in SHAPES:
        x = rng.standard_normal((rows, cols)).astype(np.float32)
        assert np.allclose(_rows_cumsum(lib, x), _ref(x), rtol=1e-4, atol=1e-3 * np.sqrt(cols))


ROW_MACRO = kernel("""
#define ROW(p, r, n) ((p) + (size_t)(r) * (n))
#define TO_FLOAT(T, v) ((T)(v))

extern "C" void cumsum_rows(const float* x, float* y, int64_t rows, int64_t cols) {
    for (int r = 0; r < rows; r++) {
        const float* xr = ROW(x, r, cols);
        float* yr = ROW(y, r, cols);
        float acc = 0.0f;
        for (int j = 0; j < cols; j++) {
            acc += TO_FLOAT(float, xr[j]);
            yr[j] = acc;
        }
    }
}
""", entry="cumsum_rows")


@pytest.mark.parametrize("move", ["vector_scan", "blocked_scan", "omp_parallel"])
def test_row_pointers_built_by_a_macro(move, tmp_path):
    # expanded, `((x) + (size_t)(r) * (cols))` would read as a cast of `+ ...` to a type
    # `x`; a variable's parentheses are dropped (`(float)` stays a cast)
    out = apply_transform(move, ROW_MACRO)
    assert out is not None, move
    assert "const float* xr = (x + (size_t)r * cols);" in out
    assert "acc += ((float)(xr[j]));" in out  # a type argument, split as the preprocessor does
    lib = build(out.replace("flags: [-O2]", "flags: [-O2, -fopenmp]"), tmp_path)
    rng = np.random.default_rng(19)
    for rows, cols in SHAPES + ((40, 30000), (2, 70001)):
        x = rng.standard_normal((rows, cols)).astype(np.float32)
        assert np.allclose(_rows_cumsum(lib, x), _ref(x), rtol=1e-4, atol=1e-3 * np.sqrt(cols))
