"""split_ranges: a loop whose body tests its counter against bounds runs as the ranges where
the test is decided. Each rewrite compiled and run against the code as written, on sizes
where the middle range is empty, the whole loop, or cut on either side; and the tests it
must leave alone."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from kernelcrew.agents.transforms import apply_transform, not_applicable
from tests.agents.test_codebase_moves import body, build, kernel, ptr, same_results

# im2col as a CNN framework writes it (a pixel helper with an early return for the padding,
# a run-time stride, pad and kernel size), the source the imported-examples tests use
UNFOLD = (Path(__file__).parent / "sources" / "dn_im2col.c").read_text().replace(
    "void im2col_cpu(", 'extern "C" void im2col_cpu(')


def _unfold_args(channels, height, width, ksize, stride, pad):
    rng = np.random.default_rng(channels * 1000 + width)
    im = rng.standard_normal(channels * height * width).astype(np.float32)
    hc = (height + 2 * pad - ksize) // stride + 1
    wc = (width + 2 * pad - ksize) // stride + 1
    out = np.full(channels * ksize * ksize * hc * wc, np.nan, dtype=np.float32)
    return [im, channels, height, width, ksize, stride, pad, out]


@pytest.mark.parametrize("sizes", [
    (3, 9, 13, 3, 1, 1),    # the usual 3x3 with a border of one
    (2, 8, 11, 3, 2, 1),    # a stride of two: the ends are ceilings of a division
    (2, 7, 10, 5, 3, 2),    # a stride of three, a wider kernel
    (2, 6, 6, 1, 1, 0),     # no padding: the middle range is the whole row
    (1, 4, 3, 5, 1, 3),     # a pad wider than the row: the middle range is empty
    (2, 5, 2, 3, 1, 1),     # a row narrower than the kernel
])
def test_padding_tests_leave_the_middle_of_each_row(tmp_path, sizes):
    src = kernel(UNFOLD, "im2col_cpu")
    new = apply_transform("split_ranges", src)
    assert new is not None and "split_ranges: w's tests decided" in new
    # the middle loop keeps only the test of the row, which does not move with w
    middle = new.split("; w < (int)kc_hi; ++w)")[1].split("for (int w = (int)kc_hi")[0]
    assert "col_1 < 0" not in middle and "col_1 >= width" not in middle
    assert "row_1 < 0" in middle
    same_results(src, new, tmp_path, "im2col_cpu", lambda: _unfold_args(*sizes), exact=True)


# shifted copies with their bounds tested by `&&` (`>` and `<=`) and by a negated `||` in an
# `if` (its comparisons parenthesized: C++'s grammar reads `x < 0 || x >= n` as a template,
# the inline_helpers view writes them so), a mirrored read (the counter's coefficient is -1) and a loop to `<=`
SHIFT = """
extern "C" void shift(const float *in, int n, int s, float *out, float *rev, float *mid)
{
    for (int i = 0; i < n; i++) {
        int z = s + i;
        mid[i] = (z > -1 && z <= n - 1) ? in[z] : 3.0f;
    }
    for (int i = 0; i <= n - 1; i++) {
        int x = i - s;
        if (!((x < 0) || (x >= n))) out[i] = in[x] * 2.0f; else out[i] = -1.0f;
        int y = n - 1 - i + s;
        rev[i] = (y < n && y >= 0) ? in[y] : 0.0f;
    }
}
"""


@pytest.mark.parametrize("n, s", [(40, 3), (40, -5), (7, 9), (7, -9), (1, 0), (33, 0)])
def test_bounds_tested_by_and_or_a_negated_or_and_a_mirrored_counter(tmp_path, n, s):
    src = kernel(SHIFT, "shift")
    new = apply_transform("split_ranges", src)
    assert new is not None and new.count("split_ranges: i's tests decided") == 2
    rng = np.random.default_rng(n)
    data = rng.standard_normal(n).astype(np.float32)

    def args():
        return [data.copy(), n, s, *(np.full(n, np.nan, np.float32) for _ in range(3))]
    same_results(src, new, tmp_path, "shift", args, exact=True)


# a row shift as C code writes it: a static helper, `long` counters declared at the top, row
# pointers, and a test whose comparisons C++'s grammar would read as a template
# (`src < 0 || src >= cols`: the `comparisons` view parenthesizes the variable)
ROWS = """
static void shift_rows(const float *img, long rows, long cols, long r, float *out)
{
    long y, x;
    for (y = 0; y < rows; y++) {
        const float *row = img + y * cols;
        float *dst = out + y * cols;
        for (x = 0; x < cols; x++) {
            long src = x - r;
            dst[x] = (src < 0 || src >= cols) ? 0.0f : row[src];
        }
    }
}
extern "C" void shift(const float *img, long rows, long cols, long r, float *out)
{
    shift_rows(img, rows, cols, r, out);
}
"""


@pytest.mark.parametrize("rows, cols, r", [(3, 50, 4), (2, 9, -3), (2, 5, 7), (1, 1, 0)])
def test_a_test_written_as_c_writes_it_in_a_helper_over_row_pointers(tmp_path, rows, cols, r):
    import ctypes

    from kernelcrew.agents.transforms.views.comparisons import unmask_comparisons

    src = kernel(ROWS, "shift")
    view = unmask_comparisons(body(src), "shift_rows")
    assert view is not None and "((src) < 0 || src >= cols)" in view
    new = apply_transform("split_ranges", src)
    assert new is not None and "split_ranges: x's tests decided" in new
    rng = np.random.default_rng(cols)
    img = rng.standard_normal(rows * cols).astype(np.float32)
    outs = []
    for name, text in (("before", src), ("after", new)):
        lib = build(text, tmp_path, name)
        out = np.full(rows * cols, np.nan, np.float32)
        lib.shift(ptr(img), ctypes.c_long(rows), ctypes.c_long(cols), ctypes.c_long(r), ptr(out))
        outs.append(out)
    assert np.array_equal(*outs)


# a 3D heat step as older C writes it: counters and neighbour indices declared at the top,
# each neighbour chosen by an equality with the first or last cell (`?:`), two buffers
# swapped between steps. The tests on y and z sit in the loop over x: the loops around it
# are split too, so the middle of the volume reads its neighbours at fixed offsets.
HEAT3D = """
extern "C" void heat(const float *src, float *a, float *b, int nx, int ny, int nz, int steps)
{
    int c, w, e, n, s, d, u;
    int x, y, z, k;
    for (k = 0; k < steps; k++) {
        for (z = 0; z < nz; z++)
            for (y = 0; y < ny; y++)
                for (x = 0; x < nx; x++) {
                    c = x + y * nx + z * nx * ny;
                    w = (x == 0) ? c : c - 1;
                    e = (x == nx - 1) ? c : c + 1;
                    n = (y == 0) ? c : c - nx;
                    s = (ny - 1 == y) ? c : c + nx;
                    d = (z == 0) ? c : c - nx * ny;
                    u = (z == nz - 1) ? c : c + nx * ny;
                    b[c] = 0.4f * a[c] + 0.1f * (a[w] + a[e] + a[n] + a[s] + a[d] + a[u])
                           + src[c];
                }
        float *t = a;
        a = b;
        b = t;
    }
}
"""


@pytest.mark.parametrize("nx, ny, nz", [(9, 7, 5), (1, 1, 1), (2, 3, 1), (17, 2, 3)])
def test_equalities_with_the_first_and_last_cell_split_every_loop_of_the_nest(
        tmp_path, nx, ny, nz):
    src = kernel(HEAT3D, "heat")
    new = apply_transform("split_ranges", src)
    assert new is not None
    for v in "xyz":
        assert f"split_ranges: {v}'s tests decided" in new
    # the middle of the volume: every neighbour at a fixed offset
    middle = new.split("for (int x = (int)kc_lo; x < (int)kc_hi; ++x)")
    assert any("w = (0) ? c : c - 1" in part and "n = (0) ? c : c - nx" in part and
               "d = (0) ? c : c - nx * ny" in part for part in middle[1:])
    rng = np.random.default_rng(nx * 100 + ny)
    vol = nx * ny * nz
    field, heat_src = (rng.standard_normal(vol).astype(np.float32) for _ in range(2))

    def args():
        return [heat_src.copy(), field.copy(), np.zeros(vol, np.float32), nx, ny, nz, 3]
    same_results(src, new, tmp_path, "heat", args, exact=True)


@pytest.mark.parametrize("test, split", [
    ("i != 0 && i != n - 1", True),   # `&&` of inequalities: decided inside the ends
    ("i == 2 || i == n - 3", True),   # a few cells in from either end
    ("i == m", False),                # a point anywhere: no side to keep
    ("i != 0 || i == 1", False),      # `||` of an inequality: decided at one point only
])
def test_equalities_at_the_ends_of_the_range(tmp_path, test, split):
    text = kernel('extern "C" void f(const float* in, float* out, int n, int m) {\n'
                  f'    for (int i = 0; i < n; i++) out[i] = ({test}) ? in[i] : -in[i];\n}}\n',
                  "f")
    new = apply_transform("split_ranges", text)
    assert (new is not None) == split
    if split:
        for n in (1, 2, 3, 4, 5, 12):
            data = np.random.default_rng(n).standard_normal(n).astype(np.float32)
            same_results(text, new, tmp_path, "f",
                         lambda n=n, data=data: [data.copy(), np.zeros(n, np.float32), n, 2],
                         exact=True)


@pytest.mark.parametrize("body", [
    # the bound changes in the loop
    "int m = n; for (int i = 0; i < n; i++) { out[i] = i < m ? in[i] : 0.0f; m--; }",
    # not linear in the counter
    "for (int i = 0; i < n; i++) out[i] = i * i < n ? in[i] : 0.0f;",
    # a float comparison
    "for (int i = 0; i < n; i++) out[i] = in[i] < 0.5f ? in[i] : 0.0f;",
    # a worksharing loop is not cut into three
    "#pragma omp parallel for\n    for (int i = 0; i < n; i++) out[i] = i < 3 ? in[i] : 0.0f;",
    # a local set under a condition before the test
    ("for (int i = 0; i < n; i++) { int x = i; if (in[i] > 0) x = 0; "
    "out[i] = x < 3 ? in[i] : 0.0f; }"),
    # the local is set again, inside the statement that holds the test, before the test
    ("for (int i = 0; i < n; i++) { int x = i; if (in[i] > 0) { x -= 5; "
    "out[i] = x < 0 ? 0.0f : in[x]; } }"),
    # the bound may change through its address
    ("int m = n; int* p = &m; for (int i = 0; i < n; i++) { out[i] = i < m ? in[i] : 0.0f; "
    "*p = 1; }"),
    # a break ends the loop: in the first of three loops it would not end the other two
    "for (int i = 0; i < n; i++) { if (in[i] < 0) break; out[i] = i < 2 ? 0.0f : in[i]; }",
    # a label in the body would be defined three times
    "for (int i = 0; i < n; i++) { again: out[i] = i < 2 ? 0.0f : in[i]; if (out[i] > 9) goto again; }",
    # unsigned arithmetic wraps: `u - 1 < 3` is not `u < 4`
    "unsigned k = (unsigned)n; for (int i = 0; i < n; i++) out[i] = i < k ? in[i] : 0.0f;",
])
def test_tests_it_leaves_alone(body):
    text = kernel('extern "C" void f(const float* in, float* out, int n) {\n    '
                  f'{body}\n}}\n', "f")
    assert apply_transform("split_ranges", text) is None
    assert "split_ranges" in not_applicable(text)


def test_the_loop_specialist_proposes_it_where_it_applies():
    from tests.agents.test_specialists import all_proposals, ctx_for

    kinds = [p.change.kind for p in all_proposals(ctx_for("unfold",
                                                           kernel=kernel(UNFOLD, "im2col_cpu")))]
    assert "split_ranges" in kinds
