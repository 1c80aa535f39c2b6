"""Moves for functions written the way other code bases write them (a polyhedral suite's
2D array parameters and typedef'd doubles, a CNN framework's pixel helper with an early
return, row and column sweeps, a symmetric result, time steps): each move before and
after, compiled and run against the code as written, and the cases each must refuse."""

from __future__ import annotations

import ctypes
import re
import subprocess

import numpy as np
import pytest

from kernelcrew.agents.transforms import apply_transform, not_applicable
from kernelcrew.agents.transforms.views import views
from kernelcrew.agents.transforms.views.expand_macros import expand_macros
from kernelcrew.agents.transforms.views.hoist_factors import hoist_factors
from kernelcrew.agents.transforms.views.inline_helpers import inline_calls
from kernelcrew.agents.transforms.views.mirror_stores import split_mirrors
from kernelcrew.csource.syntax import Source

HEAD = "/* kernelcrew\nentry: {entry}\nflags: [-O2]\n*/\n"


def kernel(src: str, entry: str) -> str:
    return HEAD.format(entry=entry) + src


def body(text: str) -> str:
    return text.split("*/\n", 1)[1] if text.startswith("/* kernelcrew") else text


def build(src: str, tmp_path, name: str, *flags: str) -> ctypes.CDLL:
    """The source as a shared library (g++, `-fopenmp` for the threaded ones)."""
    path = tmp_path / f"{name}.cpp"
    path.write_text(body(src))
    lib = tmp_path / f"{name}.so"
    r = subprocess.run(["g++", "-std=c++17", "-shared", "-fPIC", "-O2", "-fopenmp", *flags,
                        str(path), "-o", str(lib)], capture_output=True, text=True,
                       check=False)
    assert r.returncode == 0, r.stderr[-2000:]
    return ctypes.CDLL(str(lib))


def ptr(a: np.ndarray) -> ctypes.c_void_p:
    return ctypes.c_void_p(a.ctypes.data)


def call(lib: ctypes.CDLL, fn: str, *args) -> None:
    conv = []
    for a in args:
        if isinstance(a, np.ndarray):
            conv.append(ptr(a))
        elif isinstance(a, float):
            conv.append(ctypes.c_double(a))
        else:
            conv.append(ctypes.c_int(a))
    getattr(lib, fn)(*conv)


def same_results(before: str, after: str, tmp_path, fn: str, make_args, *, exact: bool,
                 flags: tuple[str, ...] = ()) -> None:
    """Both sources run on the same inputs; every array argument compared after."""
    libs = [build(before, tmp_path, "before", *flags), build(after, tmp_path, "after", *flags)]
    outs = []
    for lib in libs:
        args = make_args()
        call(lib, fn, *args)
        outs.append([a for a in args if isinstance(a, np.ndarray)])
    for a, b in zip(*outs, strict=True):
        if exact:
            assert np.array_equal(a, b), np.abs(a - b).max()
        else:
            assert np.allclose(a, b, rtol=1e-12, atol=1e-12), np.abs(a - b).max()


def rng_arrays(*shapes, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(s) for s in shapes]


# ---------------------------------------------------------------- helpers with early returns

PIXELS = """
#define PAD_VALUE 0
static float fetch(const float *img, int h, int w, int y, int x, int plane)
{
    y -= 1;
    x -= 1;
    if (y < 0 || x < 0 || y >= h || x >= w) return PAD_VALUE;
    return img[(plane * h + y) * w + x];
}

extern "C" void unfold(const float *img, int planes, int h, int w, float *cols)
{
    int p, y, x;
    for (p = 0; p < planes; ++p)
        for (y = 0; y < h + 2; ++y)
            for (x = 0; x < w + 2; ++x)
                cols[(p * (h + 2) + y) * (w + 2) + x] = fetch(img, h, w, y, x, p);
}
"""


def _pixels_args(planes=3, h=9, w=13):
    img = np.random.default_rng(1).standard_normal(planes * h * w).astype(np.float32)
    out = np.full(planes * (h + 2) * (w + 2), np.nan, dtype=np.float32)
    return [img, planes, h, w, out]


def test_a_helper_with_an_early_return_is_inlined_as_one_conditional(tmp_path):
    src = kernel(PIXELS, "unfold")
    view = inline_calls(body(src), "unfold")
    assert view is not None and "fetch(" not in view.split("extern")[1]
    # the guard stays a guard: the read happens only where the test fails
    assert "? ((float)(PAD_VALUE)) : ((float)(img[" in view
    # out of an `if`, each comparison is parenthesized (`x < 0 || y >= h` is not a template)
    assert "(y_1 < 0) || (x_1 < 0)" in view and not Source(view).has_errors()
    same_results(src, view, tmp_path, "unfold", _pixels_args, exact=True)
    # the moves it blocked now apply, and keep the results
    for move in ("omp_parallel", "simd"):
        new = apply_transform(move, src)
        assert new is not None, move
        same_results(src, new, tmp_path, "unfold", _pixels_args, exact=True)


def test_statements_after_an_early_return_run_in_its_else(tmp_path):
    src = kernel("""
static double shrink(const double *v, int i, double t)
{
    double a = v[i];
    if (a > t) return a - t;
    a = -a;
    if (a > t) return t - a;
    return 0.0;
}

extern "C" void soft(const double *v, int n, double t, double *out)
{
    for (int i = 0; i < n; i++) out[i] = shrink(v, i, t);
}
""", "soft")
    view = inline_calls(body(src), "soft")
    assert view is not None and "} else {" in view and "ret_1 = " in view
    v = rng_arrays(300)[0]
    same_results(src, view, tmp_path, "soft",
                 lambda: [v.copy(), 300, 0.5, np.zeros(300)], exact=True)


# ---------------------------------------------------------------- 2D parameters, typedefs

GESUMMV = """
#define N 64
typedef double DATA_TYPE;
extern "C" void sums(int n, double alpha, double beta, DATA_TYPE A[N][N], DATA_TYPE B[N][N],
                     DATA_TYPE tmp[N], DATA_TYPE x[N], DATA_TYPE y[N])
{
  int i, j;
  for (i = 0; i < n; i++)
    {
      tmp[i] = 0.0;
      y[i] = 0.0;
      for (j = 0; j < n; j++)
        {
          tmp[i] = A[i][j] * x[j] + tmp[i];
          y[i] = B[i][j] * x[j] + y[i];
        }
      y[i] = alpha * tmp[i] + beta * y[i];
    }
}
"""


def test_typedefd_2d_elements_summed_into_are_kept_in_locals(tmp_path):
    """`tmp[i] = tmp[i] + ...` over `DATA_TYPE` arrays reads as the reductions they are:
    the locals are of the code's own type, the dead initial stores fold into them, and
    simd, accumulators and the jam apply to the code as written."""
    src = kernel(GESUMMV, "sums")
    view = views(body(src), "sums")[-1]
    assert "DATA_TYPE tmp_acc = 0.0;" in view and "DATA_TYPE y_acc = 0.0;" in view
    assert "tmp[i] = tmp_acc;" in view

    def args():
        a, b, x = rng_arrays((64, 64), (64, 64), 64)
        return [61, 1.5, 1.2, a, b, np.zeros(64), x, np.zeros(64)]
    same_results(src, view, tmp_path, "sums", args, exact=True)
    for move in ("simd", "unroll_and_jam"):
        new = apply_transform(move, src)
        assert new is not None and "reduction(+ : tmp_acc" in new, move
        same_results(src, new, tmp_path, "sums", args, exact=False)


# ---------------------------------------------------------------- row sweeps

ATAX = """
#define M 48
#define N 56
typedef double DATA_TYPE;
extern "C" void atax(int m, int n, DATA_TYPE A[M][N], DATA_TYPE x[N], DATA_TYPE y[N],
                     DATA_TYPE tmp[M])
{
  int i, j;
  for (i = 0; i < n; i++)
    y[i] = 0;
  for (i = 0; i < m; i++)
    {
      tmp[i] = 0.0;
      for (j = 0; j < n; j++)
        tmp[i] = tmp[i] + A[i][j] * x[j];
      for (j = 0; j < n; j++)
        y[j] = y[j] + A[i][j] * tmp[i];
    }
}
"""

BICG = """
#define M 40
#define N 52
extern "C" void bicg(int m, int n, double A[N][M], double s[M], double q[N], double p[M],
                     double r[N])
{
  int i, j;
  for (i = 0; i < m; i++)
    s[i] = 0;
  for (i = 0; i < n; i++)
    {
      q[i] = 0.0;
      for (j = 0; j < m; j++)
        {
          s[j] = s[j] + r[i] * A[i][j];
          q[i] = q[i] + A[i][j] * p[j];
        }
    }
}
"""


def _atax_args(m=47, n=53):
    a, x = rng_arrays((48, 56), 56)
    return [m, n, a, x, np.zeros(56), np.zeros(48)]


def _bicg_args(m=39, n=51):
    a, p, r = rng_arrays((52, 40), 40, 52)
    return [m, n, a, np.zeros(40), np.zeros(52), p, r]


@pytest.mark.parametrize("factor", [4, 8])
def test_a_sweep_with_a_dot_product_and_a_row_added_is_jammed(tmp_path, factor):
    src = kernel(ATAX, "atax")
    assert apply_transform("unroll_and_jam", src) is None  # two inner loops: not its shape
    new = apply_transform("jam_sweeps", src, {"factor": factor})
    assert new is not None and f"jammed by {factor}" in new
    # the dot products share one pass, the rows are added in their order in one statement
    assert "reduction(+ : tmp_acc, tmp_acc_1" in new
    assert "(y[j] + (A[i][j] * tmp[i])) + (A[(i + 1)][j] * tmp[(i + 1)]))" in new
    assert new.count("y[j] = ") == 2  # the jammed statement and the leftover rows' one
    same_results(src, new, tmp_path, "atax", _atax_args, exact=False)
    # row counts below, at and above the factor
    for m in (1, factor, factor + 3):
        same_results(src, new, tmp_path, "atax", lambda m=m: _atax_args(m=m), exact=False)


def test_a_sweep_that_sums_and_updates_in_one_loop_is_jammed(tmp_path):
    src = kernel(BICG, "bicg")
    new = apply_transform("jam_sweeps", src)
    assert new is not None and "reduction(+ : q_acc, q_acc_1, q_acc_2, q_acc_3)" in new
    assert "s[j] = (((s[j] + (r[i] * A[i][j]))" in new
    same_results(src, new, tmp_path, "bicg", _bicg_args, exact=False)


def test_a_threaded_sweep_keeps_its_reduction_when_jammed(tmp_path):
    """Threads over the rows with private copies of the vector the rows are added into,
    then the jam: the `reduction(+ : y[...])` stays on the jammed loop."""
    src = kernel(ATAX, "atax")
    new = apply_transform("private_bins", src, {"extents": {"y": "56"},
                                                "then": [["jam_sweeps", {"factor": 4}]]})
    assert new is not None
    assert new.count("reduction(+ : y[0:56])") == 1 and "jammed by 4" in new
    big = kernel(ATAX.replace("48", "480").replace("56", "560"), "atax")
    big_new = apply_transform("private_bins", big, {
        "extents": {"y": "560"}, "then": [["jam_sweeps", {"factor": 4}]]})

    def args():
        a, x = rng_arrays((480, 560), 560)
        return [479, 557, a, x, np.zeros(560), np.zeros(480)]
    # PRIVATE_PER_BIN and OMP_MIN_WORK small enough that the threaded copy runs
    same_results(big, big_new, tmp_path, "atax", args, exact=False,
                 flags=("-DOMP_MIN_WORK=1000", "-DPRIVATE_PER_BIN=1"))


@pytest.mark.parametrize("change, why", [
    # the vector added into is read by the row's dot product: rows linked through it
    ("        tmp[i] = tmp[i] + A[i][j] * x[j];",
     "        tmp[i] = tmp[i] + A[i][j] * y[j];"),
    # the inner range moves with the row (a triangle)
    ("      for (j = 0; j < n; j++)\n        y[j]", "      for (j = i; j < n; j++)\n        y[j]"),
    # a column read: the jam would gather (interchange first)
    ("        tmp[i] = tmp[i] + A[i][j] * x[j];",
     "        tmp[i] = tmp[i] + A[j][i] * x[j];"),
    # a scalar carried from row to row
    ("      tmp[i] = 0.0;", "      tmp[i] = carry; carry = carry + 1.0;"),
])
def test_sweeps_the_jam_must_not_take(change, why):
    src = ATAX.replace("  int i, j;", "  int i, j;\n  double carry = 0;")
    assert change in src
    bad = kernel(src.replace(change, why), "atax")
    assert not Source(body(bad)).has_errors()
    assert apply_transform("jam_sweeps", bad) is None
    assert "jam_sweeps" in not_applicable(bad)


# ---------------------------------------------------------------- column sweeps

MVT = """
#define N 72
typedef double DATA_TYPE;
extern "C" void mvt(int n, DATA_TYPE x1[N], DATA_TYPE x2[N], DATA_TYPE y_1[N],
                    DATA_TYPE y_2[N], DATA_TYPE A[N][N])
{
  int i, j;
  for (i = 0; i < n; i++)
    for (j = 0; j < n; j++)
      x1[i] = x1[i] + A[i][j] * y_1[j];
  for (i = 0; i < n; i++)
    for (j = 0; j < n; j++)
      x2[i] = x2[i] + A[j][i] * y_2[j];
}
"""


def _mvt_args(n=71):
    x1, x2, y1, y2, a = rng_arrays(72, 72, 72, 72, (72, 72))
    return [n, x1, x2, y1, y2, a]


def test_a_column_sweep_accumulates_a_strip_of_outputs(tmp_path):
    """`x2[i] += A[j][i] * y[j]` reads A down its columns: a strip of outputs is
    accumulated a row of A at a time (outer-loop vectorization), each sum in its order of
    terms, so the results are the same bit for bit; the row sweep beside it is left to
    the dot-product moves."""
    src = kernel(MVT, "mvt")
    new = apply_transform("row_accumulate", src)
    assert new is not None and new.count("row accumulators") == 1
    assert "x2_acc_row[i - i_strip] += A[j][i] * y_2[j];" in new
    same_results(src, new, tmp_path, "mvt", _mvt_args, exact=True)
    # the strips are tiles of the outputs: threads take them whole
    threaded = apply_transform("omp_parallel", new)
    assert threaded is not None
    assert "#pragma omp for schedule(static)\n" in threaded
    same_results(src, threaded, tmp_path, "mvt", _mvt_args, exact=True,
                 flags=("-DOMP_MIN_WORK=1",))
    for n in (1, 5):
        same_results(src, threaded, tmp_path, "mvt", lambda n=n: _mvt_args(n), exact=True,
                     flags=("-DOMP_MIN_WORK=1",))


def test_a_column_sweep_is_interchanged_into_rows_added_into_the_outputs(tmp_path):
    """The same column sweep, `x2_acc = x2_acc + A[j][i] * y_2[j]` with the sum starting at
    the element: interchanged, each row of A is added into x2 (unit stride), each element
    keeping its order of terms."""
    src = kernel(MVT, "mvt")
    new = apply_transform("interchange", src)
    assert new is not None and "x2[i] += A[j][i] * a_j;" in new
    same_results(src, new, tmp_path, "mvt", _mvt_args, exact=True)
    for n in (1, 7, 8):
        same_results(src, new, tmp_path, "mvt", lambda n=n: _mvt_args(n), exact=True)


def test_a_row_sweep_is_not_taken_for_a_strip():
    only_rows = kernel(MVT.split("  for (i = 0; i < n; i++)\n    for (j = 0; j < n; j++)\n"
                                 "      x2")[0] + "}\n", "mvt")
    assert not Source(body(only_rows)).has_errors()
    assert apply_transform("row_accumulate", only_rows) is None
    assert "reads no array down its columns" in not_applicable(only_rows)["row_accumulate"]


# ---------------------------------------------------------------- a symmetric result

COVARIANCE = """
#define M 40
#define N 50
extern "C" void cov(int m, int n, double float_n, double data[N][M], double c[M][M])
{
  int i, j, k;
  for (i = 0; i < m; i++)
    for (j = i; j < m; j++)
      {
        c[i][j] = 0.0;
        for (k = 0; k < n; k++)
          c[i][j] += data[k][i] * data[k][j];
        c[i][j] /= (float_n - 1.0);
        c[j][i] = c[i][j];
      }
}
"""


def _cov_args(m=39, n=47):
    return [m, n, 47.0, rng_arrays((50, 40))[0], np.full((40, 40), 7.0)]


def test_the_mirror_stores_go_after_the_triangle(tmp_path):
    src = kernel(COVARIANCE, "cov")
    view = split_mirrors(body(src), "cov")
    assert view is not None and "the mirror stores, after the triangle" in view
    assert view.count("c[j][i] = c[i][j];") == 1
    same_results(src, view, tmp_path, "cov", _cov_args, exact=True)


def test_a_triangular_nest_with_column_reads_is_stripped_and_threaded(tmp_path):
    """The covariance's `data[k][i] * data[k][j]`: strips of j accumulate rows of data,
    the rows of the triangle are threaded one at a time (unequal work), and the results
    are the same bit for bit."""
    src = kernel(COVARIANCE, "cov")
    new = apply_transform("row_accumulate", src)
    assert new is not None and "c_acc_row[j - j_strip] += data[k][i] * data[k][j];" in new
    same_results(src, new, tmp_path, "cov", _cov_args, exact=True)
    threaded = apply_transform("omp_parallel", new)
    assert threaded is not None and "schedule(static, 1)" in threaded
    for m in (1, 3, 39):
        same_results(src, threaded, tmp_path, "cov", lambda m=m: _cov_args(m=m), exact=True,
                     flags=("-DOMP_MIN_WORK=1",))


# the same nest as a polyhedral suite's sources write it: element type, extents, padding
# and loop bounds through macros, the array parameters declared by a macro
MACRO_DECLARED = """
#define PADDING 0
#define NO_ALIAS
#define PICK(fixed, given) fixed
#define BOUND(fixed, given) given
#define ARRAY_1D(var, d1, dd1) var[NO_ALIAS PICK(d1, dd1) + PADDING]
#define ARRAY_2D(var, d1, d2, dd1, dd2) var[NO_ALIAS PICK(d1, dd1) + PADDING][PICK(d2, dd2) + PADDING]
#define M 40
#define N 50
#define _B_M BOUND(M, m)
#define _B_N BOUND(N, n)
#define ELEM double
extern "C" void cov(int m, int n, ELEM float_n,
                    ELEM ARRAY_2D(data, N, M, n, m),
                    ELEM ARRAY_2D(c, M, M, m, m))
{
  int i, j, k;
  for (i = 0; i < _B_M; i++)
    for (j = i; j < _B_M; j++)
      {
        c[i][j] = 0.0;
        for (k = 0; k < _B_N; k++)
          c[i][j] += data[k][i] * data[k][j];
        c[i][j] /= (float_n - 1.0);
        c[j][i] = c[i][j];
      }
}
"""


def test_array_parameters_declared_by_a_macro_are_read_as_arrays(tmp_path):
    """`ELEM ARRAY_2D(data, N, M, n, m)` parses as a function declarator: the view expands
    it (macro in macro, the empty and zero padding dropped) to `ELEM data[N][M]`, and the
    triangle's moves apply as on the plain spelling, bit for bit."""
    src = kernel(MACRO_DECLARED, "cov")
    view = expand_macros(body(src), "cov")
    assert view is not None
    assert "ELEM data[N][M]," in view and "ELEM c[M][M])" in view
    assert view.count("ARRAY_2D(") == 1  # the definition stays
    new = apply_transform("row_accumulate", src)
    assert new is not None and "+= data[k][i] * data[k][j];" in new
    # the moved kernel keeps the interface as the code base spells it (a patch back to it
    # must not change a declaration)
    assert "ELEM ARRAY_2D(data, N, M, n, m)," in new and "ELEM data[N][M]" not in new
    same_results(src, new, tmp_path, "cov", _cov_args, exact=True)
    threaded = apply_transform("omp_parallel", new)
    assert threaded is not None
    same_results(src, threaded, tmp_path, "cov", lambda: _cov_args(m=39), exact=True,
                 flags=("-DOMP_MIN_WORK=1",))


def test_macro_declared_arrays_in_a_static_helper_the_entry_calls(tmp_path):
    """As `kernelcrew import` writes it: the code base's function is a static helper and a
    generated entry calls it; the helper's declarations and bounds are read all the same."""
    helper = MACRO_DECLARED.replace('extern "C" void cov(', "static void cov_body(")
    src = kernel(helper + """
extern "C" void cov(int m, int n, double float_n, double* data, double* c)
{
  cov_body(m, n, float_n, reinterpret_cast<double (*)[M]>(data),
           reinterpret_cast<double (*)[M]>(c));
}
""", "cov")
    new = apply_transform("row_accumulate", src)
    assert new is not None and "+= data[k][i] * data[k][j];" in new
    assert "ELEM ARRAY_2D(data, N, M, n, m)," in new
    same_results(src, new, tmp_path, "cov", _cov_args, exact=True)


def test_a_macro_that_is_a_call_keeps_the_call(tmp_path):
    """`#define ROOT(x) sqrt(x)` (a polyhedral suite's SQRT_FUN) on a plain variable: the
    parentheses of `(x)` mean nothing where they only wrap the parameter, but in `sqrt(x)`
    they are the call's; the view once wrote `sqrtx`, and every move through it failed to
    compile."""
    src = kernel("#include <math.h>\n#define ROOT(x) sqrt(x)\n#define HALF(x) (x) / 2\n" +
                 MACRO_DECLARED.replace("c[i][j] /= (float_n - 1.0);",
                                        "c[i][j] /= (float_n - 1.0) * ROOT(float_n) * "
                                        "HALF(float_n);"), "cov")
    view = expand_macros(body(src), "cov")
    assert view is not None
    assert "sqrt(float_n) * float_n / 2;" in view and "sqrtfloat_n" not in view
    new = apply_transform("row_accumulate", src)
    assert new is not None
    same_results(src, new, tmp_path, "cov", _cov_args, exact=True)


def test_a_macro_declarator_that_cannot_be_expanded_is_left_as_written():
    # two arguments for a macro of five: the preprocessor would refuse it, so does the view
    src = MACRO_DECLARED.replace("ELEM ARRAY_2D(c, M, M, m, m))", "ELEM ARRAY_2D(c, M))")
    view = expand_macros(src, "cov")
    assert view is not None and "ELEM data[N][M]," in view and "ARRAY_2D(c, M))" in view


@pytest.mark.parametrize("old, new", [
    # the mirror is not the last statement: something after it may read the lower triangle
    ("        c[j][i] = c[i][j];\n", "        c[j][i] = c[i][j];\n        c[i][j] += 1.0;\n"),
    # a square nest: the mirror overwrites elements the nest computes itself
    ("    for (j = i; j < m; j++)", "    for (j = 0; j < m; j++)"),
    # the body reads the lower triangle
    ("        c[i][j] /= (float_n - 1.0);", "        c[i][j] /= c[j][i];"),
    # a row may skip its mirror
    ("        c[i][j] /= (float_n - 1.0);",
     "        c[i][j] /= (float_n - 1.0);\n        if (c[i][j] > 9.0) continue;"),
])
def test_mirrors_that_must_stay(old, new):
    assert old in COVARIANCE
    src = COVARIANCE.replace(old, new)
    assert not Source(src).has_errors()
    assert split_mirrors(src, "cov") is None


# ---------------------------------------------------------------- products over 2D arrays

GEMM = """
#define NI 36
#define NJ 44
#define NK 40
typedef double DATA_TYPE;
extern "C" void gemm(int ni, int nj, int nk, double alpha, double beta,
                     DATA_TYPE C[NI][NJ], DATA_TYPE A[NI][NK], DATA_TYPE B[NK][NJ])
{
  int i, j, k;
  for (i = 0; i < ni; i++) {
    for (j = 0; j < nj; j++)
      C[i][j] *= beta;
    for (k = 0; k < nk; k++) {
      for (j = 0; j < nj; j++)
        C[i][j] += alpha * A[i][k] * B[k][j];
    }
  }
}
"""


def _gemm_args(ni=35, nj=43, nk=39):
    c, a, b = rng_arrays((36, 44), (36, 40), (40, 44))
    return [ni, nj, nk, 1.5, 1.2, c, a, b]


def test_a_product_on_2d_arrays_is_register_blocked(tmp_path):
    """`C[i][j] += alpha * A[i][k] * B[k][j]` after `C[i][j] *= beta`: the leading factor
    is taken once per k (a view), the scaling starts the block's accumulators, and each
    element sums its k terms in order: the same results bit for bit at -O2."""
    src = kernel(GEMM, "gemm")
    view = hoist_factors(body(src), "gemm")
    assert view is not None and "const DATA_TYPE alpha_A = alpha * A[i][k];" in view
    same_results(src, view, tmp_path, "gemm", _gemm_args, exact=True)
    new = apply_transform("register_block", src)
    assert new is not None and "= C[(i + r)][j] * beta;" in new
    for ni, nj in ((35, 43), (3, 5), (4, 16), (36, 44)):
        same_results(src, new, tmp_path, "gemm", lambda a=ni, b=nj: _gemm_args(a, b),
                     exact=True)


# the same product as a polyhedral suite writes it: loop bounds through an object-like
# macro that stands for another macro's invocation (or for a parameter), the element type
# a macro, and the region marked for a polyhedral tool with `#pragma scop`
GEMM_AS_A_SUITE_WRITES_IT = """
#define NI 36
#define NJ 44
#define NK 40
#define BOUND(fixed, given) given
#define _B_NI BOUND(NI, ni)
#define _B_NJ BOUND(NJ, nj)
#define _B_NK nk
#define ELEM double
extern "C" void gemm(int ni, int nj, int nk, ELEM alpha, ELEM beta,
                     ELEM C[NI][NJ], ELEM A[NI][NK], ELEM B[NK][NJ])
{
  int i, j, k;
#pragma scop
  for (i = 0; i < _B_NI; i++) {
    for (j = 0; j < _B_NJ; j++)
      C[i][j] *= beta;
    for (k = 0; k < _B_NK; k++) {
      for (j = 0; j < _B_NJ; j++)
        C[i][j] += alpha * A[i][k] * B[k][j];
    }
  }
#pragma endscop
}
"""


def test_macro_bounds_and_a_marker_pragma_do_not_hide_the_product(tmp_path):
    """The bounds read as the preprocessor reads them (`_B_NI` -> `BOUND(NI, ni)` -> `ni`,
    `_B_NK` -> `nk`), `#pragma scop` annotates no loop: the product is register-blocked as
    in its plain spelling, with the same results bit for bit."""
    src = kernel(GEMM_AS_A_SUITE_WRITES_IT, "gemm")
    view = expand_macros(body(src), "gemm")
    assert view is not None
    assert "for (i = 0; i < ni; i++)" in view and "for (k = 0; k < nk; k++)" in view
    new = apply_transform("register_block", src)
    assert new is not None and "#pragma scop" in new
    for ni, nj in ((35, 43), (3, 5), (36, 44)):
        same_results(src, new, tmp_path, "gemm", lambda a=ni, b=nj: _gemm_args(a, b),
                     exact=True)


def test_a_merge_threads_the_rows_before_it_blocks_them(tmp_path):
    """The specialists rank the register block above the threads; the merge applies the
    threads first, so the loop over blocks of rows carries the `parallel for` (after the
    blocking, a loop stepping by RB with its leftover rows is one the thread analysis
    cannot prove disjoint: the merge then threaded only the leftover rows). Threaded at
    any size (OMP_MIN_WORK=1), each element still sums its terms in order."""
    from kernelcrew.agents.coordinator import apply_order, coordinate
    from kernelcrew.agents.transforms import apply_change
    from tests.agents.test_specialists import all_proposals, ctx_for

    src = kernel(GEMM_AS_A_SUITE_WRITES_IT, "gemm")
    ctx = ctx_for("gemm", kernel=src)
    props = all_proposals(ctx)
    kinds = [p.change.kind for p in props]
    assert kinds.index("register_block") < kinds.index("omp_parallel")
    ordered = [p.change.kind for p in apply_order(props)]
    assert ordered.index("omp_parallel") < ordered.index("register_block")
    merged = coordinate(props, ctx.kernel,
                        apply=lambda p, t: apply_change(p.change, t)).candidates[0].change
    assert {"omp_parallel", "register_block"} <= set(merged.kind.split("+"))
    assert re.search(r"#pragma omp parallel for[^\n]*\n\s*for \(int i = 0; i < i_rb; "
                     r"i \+= RB\)", merged.kernel), merged.kernel
    for ni, nj in ((35, 43), (3, 5), (36, 44)):
        same_results(src, merged.kernel, tmp_path, "gemm",
                     lambda a=ni, b=nj: _gemm_args(a, b), exact=True,
                     flags=("-DOMP_MIN_WORK=1",))


def test_an_unknown_pragma_before_the_nest_still_stops_the_move():
    """Only marker pragmas are passed over: a pragma the analysis does not know may change
    how the loop compiles, so the move stays away."""
    src = kernel(GEMM_AS_A_SUITE_WRITES_IT.replace("#pragma scop", "#pragma vendor pipeline"),
                 "gemm")
    assert apply_transform("register_block", src) is None


@pytest.mark.parametrize("old, new", [
    # the factor moves with j
    ("alpha * A[i][k] * B[k][j]", "alpha * A[i][j] * B[k][j]"),
    # a float factor in a double product: hoisted into a double it would round otherwise
    ("double alpha, double beta", "float alpha, double beta"),
    # C read in the factor
    ("alpha * A[i][k] * B[k][j]", "C[i][k] * A[i][k] * B[k][j]"),
])
def test_factors_that_stay_in_the_loop(old, new):
    src = GEMM.replace(old, new)
    out = hoist_factors(src, "gemm")
    assert out is None or "alpha_A" not in out and "C_A" not in out


# ---------------------------------------------------------------- time steps

JACOBI = """
#define N 40
extern "C" void jacobi(int tsteps, int n, double A[N][N], double B[N][N])
{
  int t, i, j;
  for (t = 0; t < tsteps; t++)
    {
      for (i = 1; i < n - 1; i++)
        for (j = 1; j < n - 1; j++)
          B[i][j] = 0.2 * (A[i][j] + A[i][j-1] + A[i][1+j] + A[1+i][j] + A[i-1][j]);
      for (i = 1; i < n - 1; i++)
        for (j = 1; j < n - 1; j++)
          A[i][j] = 0.2 * (B[i][j] + B[i][j-1] + B[i][1+j] + B[1+i][j] + B[i-1][j]);
    }
}
"""


def _jacobi_args(t=7, n=39):
    a, b = rng_arrays((40, 40), (40, 40))
    return [t, n, a, b]


def test_time_steps_share_one_parallel_region(tmp_path):
    src = kernel(JACOBI, "jacobi")
    new = apply_transform("time_steps", src)
    assert new is not None
    assert new.count("#pragma omp parallel\n") == 1
    assert new.count("#pragma omp for schedule(static)") == 2
    for t, n in ((7, 39), (1, 3), (0, 40)):
        same_results(src, new, tmp_path, "jacobi", lambda t=t, n=n: _jacobi_args(t, n),
                     exact=True, flags=("-DOMP_MIN_WORK=1",))


def test_time_steps_thread_by_the_work_of_all_steps_and_a_share_per_step(tmp_path):
    """The region starts once: all the steps' work is held against OMP_MIN_WORK, and a step
    needs OMP_MIN_WORK / STEP_SHARE for its barriers. Which copy ran is read back from a
    flag the threaded copy sets."""
    import ctypes

    from kernelcrew.agents.transforms.cpu.time_steps import MARK, STEP_SHARE

    src = kernel(JACOBI, "jacobi")
    new = apply_transform("time_steps", src)
    cond = next(line for line in new.splitlines() if MARK in line)
    assert f"* {STEP_SHARE} >= OMP_MIN_WORK" in cond and "(tsteps) *" in cond
    flagged = body(new).replace(MARK + "\n", MARK + "\n    took_threads = 1;\n", 1)
    flagged = 'extern "C" { int took_threads = 0; }\n' + flagged
    # a step's work is (n - 1)^2 = 1521 at n = 40; OMP_MIN_WORK = 1521 x STEP_SHARE: every
    # step holds its share, so the steps' total decides (threaded from STEP_SHARE steps)
    lib = build(flagged, tmp_path, "flagged", f"-DOMP_MIN_WORK={1521 * STEP_SHARE}")
    took = ctypes.c_int.in_dll(lib, "took_threads")
    for t, threaded in ((1, False), (STEP_SHARE - 1, False), (STEP_SHARE, True)):
        took.value = 0
        call(lib, "jacobi", *_jacobi_args(t, 40))
        assert took.value == int(threaded), (t, took.value)
    # and a step under its share stays serial however many steps there are
    lib = build(flagged, tmp_path, "small_steps", f"-DOMP_MIN_WORK={1522 * STEP_SHARE}")
    took = ctypes.c_int.in_dll(lib, "took_threads")
    call(lib, "jacobi", *_jacobi_args(10 * STEP_SHARE, 40))
    assert took.value == 0


@pytest.mark.parametrize("old, new, why", [
    # in place (Gauss-Seidel): a step's rows are not independent
    ("          B[i][j] = 0.2 * (A[i][j]", "          A[i][j] = 0.2 * (A[i][j]", "in place"),
    # the steps' count changes inside: threads could meet different barriers
    ("      for (i = 1; i < n - 1; i++)\n        for (j = 1; j < n - 1; j++)\n          B",
     ("      tsteps = tsteps - 1;\n      for (i = 1; i < n - 1; i++)\n"
     "        for (j = 1; j < n - 1; j++)\n          B"), "a statement between the loops"),
    # a step may end early
    ("      for (i = 1; i < n - 1; i++)\n        for (j = 1; j < n - 1; j++)\n          A",
     ("      if (B[1][1] > 1e9) break;\n      for (i = 1; i < n - 1; i++)\n"
     "        for (j = 1; j < n - 1; j++)\n          A"), "a break"),
])
def test_time_loops_that_must_keep_their_threads_per_loop(old, new, why):
    assert old in JACOBI, why
    bad = kernel(JACOBI.replace(old, new), "jacobi")
    assert not Source(body(bad)).has_errors()
    assert apply_transform("time_steps", bad) is None, why
    assert "time_steps" in not_applicable(bad)


def test_an_independent_outer_loop_is_left_to_omp_parallel():
    rows = kernel("""
#define N 40
extern "C" void two(int n, double A[N][N], double B[N][N], double C[N][N])
{
  for (int i = 0; i < n; i++) {
    for (int j = 0; j < n; j++) B[i][j] = A[i][j] + 1.0;
    for (int j = 0; j < n; j++) C[i][j] = B[i][j] * 2.0;
  }
}
""", "two")
    assert apply_transform("time_steps", rows) is None
    assert "independent itself" in not_applicable(rows)["time_steps"]
    assert apply_transform("omp_parallel", rows) is not None


TWO_MM = """
#define NI 30
#define NJ 36
#define NK 40
#define NL 28
typedef double DATA_TYPE;
extern "C" void two_mm(int ni, int nj, int nk, int nl, double alpha, double beta,
    DATA_TYPE tmp[NI][NJ], DATA_TYPE A[NI][NK], DATA_TYPE B[NK][NJ], DATA_TYPE C[NJ][NL],
    DATA_TYPE D[NI][NL])
{
  int i, j, k;
  for (i = 0; i < ni; i++)
    for (j = 0; j < nj; j++)
      {
        tmp[i][j] = 0.0;
        for (k = 0; k < nk; ++k)
          tmp[i][j] += alpha * A[i][k] * B[k][j];
      }
  for (i = 0; i < ni; i++)
    for (j = 0; j < nl; j++)
      {
        D[i][j] *= beta;
        for (k = 0; k < nj; ++k)
          D[i][j] += tmp[i][k] * C[k][j];
      }
}
"""


def _two_mm_args(ni=29, nj=35, nk=39, nl=27):
    t, a, b, c, d = rng_arrays((30, 36), (30, 40), (40, 36), (36, 28), (30, 28))
    return [ni, nj, nk, nl, 1.5, 1.2, t, a, b, c, d]


def test_i_j_k_products_that_scale_their_output_first_are_interchanged_and_blocked(tmp_path):
    """`D[i][j] *= beta; for k: D[i][j] += tmp[i][k] * C[k][j];` (the sum starts at the
    element itself): the scaling becomes a loop over j before the products, each element
    still sums its terms in order; then both nests are register-blocked."""
    src = kernel(TWO_MM, "two_mm")
    new = apply_transform("interchange", src)
    assert new is not None and new.count("a_k") >= 2 and "D[i][j] *= beta;" in new
    same_results(src, new, tmp_path, "two_mm", _two_mm_args, exact=True)
    blocked = apply_transform("register_block", new)
    assert blocked is not None and "D[(i + r2)][j] * beta;" in blocked
    for sizes in ((29, 35, 39, 27), (3, 5, 7, 9), (30, 36, 40, 28)):
        same_results(src, blocked, tmp_path, "two_mm", lambda s=sizes: _two_mm_args(*s),
                     exact=True)


def test_a_sum_that_starts_elsewhere_is_not_interchanged():
    """The second product's sum starts at another array's element (`D[i][j] = C[0][j];`
    before it): not the element it is stored to, nor zero, so it is left in its order
    (the first product is still interchanged)."""
    src = kernel(TWO_MM.replace("        D[i][j] *= beta;\n", "        D[i][j] = C[0][j];\n"),
                 "two_mm")
    new = apply_transform("interchange", src)
    assert new is not None and "a_k2" not in new and "D[i][j] +=" not in new
