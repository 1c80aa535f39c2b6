"""Each source transformation on small C++ snippets: the result is checked on its parse
tree (where the pragmas are, what the loops look like), and illegal cases are refused."""

from __future__ import annotations

import re
import subprocess

import pytest

from kernelcrew.agents.transforms import (
    add_restrict,
    fuse_loops,
    interchange,
    omp_parallel_outer,
    omp_simd_inner,
    register_block,
    tile,
    unroll,
    vector_math,
)
from kernelcrew.agents.transforms.analysis.common import in_small_path
from kernelcrew.agents.transforms.cpu.register_block import REST_MARK
from kernelcrew.csource.affine import FunctionModel
from kernelcrew.csource.syntax import (
    Source,
    find_function,
    params,
    pragma_text,
    pragmas_before,
    walk,
)


def model(src: str, entry: str = "f") -> FunctionModel:
    s = Source(src)
    assert not s.has_errors(), src
    fn = find_function(s, entry)
    assert fn is not None
    return FunctionModel(s, fn)


def pragmas_of(m: FunctionModel) -> dict[int, list[str]]:
    """line of each loop -> the pragmas attached to it."""
    return {m.src.line_of(lp.node): [pragma_text(m.src, p) for p in pragmas_before(lp.node)]
            for lp in m.loops}


def compiles(src: str, *flags: str) -> bool:
    r = subprocess.run(["g++", "-std=c++17", "-fsyntax-only", "-Wall", "-Werror=unknown-pragmas",
                        *flags, "-x", "c++", "-"], input="#include <cmath>\n#include <cstdint>\n"
                       + src, capture_output=True, text=True, check=False)
    return r.returncode == 0


ROWSUM = """
void f(const float* x, float* out, int64_t rows, int64_t cols) {
    for (int64_t i = 0; i < rows; ++i) {
        float acc = 0.0f;
        for (int64_t j = 0; j < cols; ++j) {
            acc += x[i * cols + j];
        }
        out[i] = acc;
    }
}
"""


def test_restrict_qualifies_every_pointer_parameter():
    out = add_restrict(ROWSUM, "f")
    m = model(out)
    ps = params(m.fn)
    assert [p.name for p in ps if p.pointer is not None] == ["x", "out"]
    assert all(p.restrict for p in ps if p.pointer is not None)
    assert not any(p.restrict for p in ps if p.pointer is None)
    assert add_restrict(out, "f") is None  # nothing left to do
    assert compiles(out)


def test_restrict_leaves_out_the_parameters_the_function_swaps():
    # time steps over two buffers swapped in place: after the swap `a` points at what
    # was `b`'s buffer, so neither may be restrict; `p` is never assigned
    src = """
void steps(const float *p, float *a, float *b, int n, int k) {
    for (int t = 0; t < k; t++) {
        for (int i = 1; i < n - 1; i++) b[i] = a[i - 1] + a[i + 1] + p[i];
        float *tmp = a;
        a = b;
        b = tmp;
    }
}
"""
    out = add_restrict(src, "steps")
    ps = {p.name: p for p in params(model(out, "steps").fn)}
    assert ps["p"].restrict and not ps["a"].restrict and not ps["b"].restrict
    assert add_restrict(out, "steps") is None and compiles(out)


def test_parallel_outer_versions_the_independent_row_loop():
    out = omp_parallel_outer(ROWSUM, "f", min_work=1000)
    m = model(out)
    ifs = [n for n in walk(m.body) if n.type == "if_statement"]
    assert len(ifs) == 1
    cond = m.src.text_of(ifs[0].child_by_field_name("condition"))
    assert re.search(r"rows \* cols >= 1000", cond)
    tops = m.forest
    assert len(tops) == 2  # threaded copy and serial copy
    pr = [[pragma_text(m.src, p) for p in pragmas_before(lp.node)] for lp in tops]
    assert pr == [["omp parallel for schedule(static)"], []]
    assert omp_parallel_outer(out, "f") is None  # already threaded
    assert compiles(out, "-fopenmp")
    # the serial copy is the same code: later hints (simd) reach both versions
    vec = model(omp_simd_inner(out, "f"))
    inner = [lp for lp in vec.loops if not lp.children]
    assert [[pragma_text(vec.src, p) for p in pragmas_before(lp.node)] for lp in inner] == [
        ["omp simd reduction(+ : acc)"]] * 2


def test_parallel_outer_shares_one_region_over_consecutive_passes():
    src = """
void f(const float* x, float* y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] = x[i] + 1.0f;
    // second pass reads what the first wrote, at the same index
    for (int64_t i = 0; i < n; ++i) y[i] = y[i] * 2.0f;
}
"""
    out = omp_parallel_outer(src, "f", min_work=10)
    m = model(out)
    allp = [pragma_text(m.src, n) for n in walk(m.body) if n.type == "preproc_call"]
    assert allp == ["omp parallel", "omp for schedule(static)", "omp for schedule(static)"]
    assert compiles(out, "-fopenmp")


@pytest.mark.parametrize("body, why", [
    ("for (int64_t i = 1; i < n; ++i) y[i] = y[i - 1] + x[i];", "loop-carried through y"),
    ("for (int64_t i = 0; i < n; ++i) { s += x[i]; y[i] = s; }",
     "a running sum read in the loop (a scan; a plain sum is a threaded reduction)"),
    ("for (int64_t i = 0; i < n; ++i) y[0] += x[i];", "every iteration writes y[0]"),
    ("for (int64_t i = 0; i < n; ++i) y[i] = y[i + 1];", "reads an element another writes"),
    ("for (int64_t i = 0; i < n; ++i) { y[i] = x[i]; if (x[i] < 0) break; }", "breaks out"),
    ("for (int64_t i = 0; i < n; ++i) y[i] = g(x[i]);", "calls an unknown function"),
    ("for (int64_t i = 0; i < n; ++i) *y++ = x[i];", "writes through a moving pointer"),
    ("for (int64_t i = 0; i < n; ++i) y[i % 4] = x[i];", "subscript not affine"),
    ("for (int64_t i = 0; i < n; ++i) for (int64_t j = 0; j < n; ++j) y[i + j] = x[j];",
     "rows overlap: y[i + j]"),
])
def test_parallel_refuses_dependent_loops(body, why):
    src = f"float g(float);\nvoid f(const float* x, float* y, int64_t n) {{ float s = 0; " \
          f"{body} y[0] = s; }}"
    assert omp_parallel_outer(src, "f", min_work=1) is None, why


def test_simd_adds_reduction_clauses_and_rewrites_if_max():
    src = """
void f(const float* x, float* y, int64_t rows, int64_t cols) {
    for (int64_t i = 0; i < rows; ++i) {
        const float* xr = x + i * cols;
        float mx = xr[0];
        for (int64_t j = 1; j < cols; ++j) {
            if (xr[j] > mx) mx = xr[j];
        }
        float sum = 0.0f, prod = 1.0f;
        for (int64_t j = 0; j < cols; ++j) {
            sum += xr[j] - mx;
            prod *= xr[j];
        }
        float lo = xr[0];
        for (int64_t j = 0; j < cols; ++j) lo = fminf(lo, xr[j]);
        y[i] = sum + prod + lo;
    }
}
"""
    out = omp_simd_inner(src, "f")
    m = model(out)
    inner = [lp for lp in m.loops if not lp.children]
    got = [[pragma_text(m.src, p) for p in pragmas_before(lp.node)] for lp in inner]
    assert got == [["omp simd reduction(max : mx)"], [("omp simd reduction(* : prod) "
                                                      "reduction(+ : sum)")],
                   ["omp simd reduction(min : lo)"]]
    # the if-max became a conditional expression (vectorizable), same semantics
    assert not any(n.type == "if_statement" for n in walk(inner[0].body))
    assert "mx = (xr[j] > mx) ? xr[j] : mx;" in out
    # the outer loop is not innermost: no simd there
    assert pragmas_before(m.loops[0].node) == []
    assert omp_simd_inner(out, "f") is None
    assert compiles(out, "-fopenmp-simd")


def test_simd_refuses_a_prefix_sum():
    src = """
void f(const float* x, float* y, int64_t n) {
    float acc = 0.0f;
    for (int64_t j = 0; j < n; ++j) { acc += x[j]; y[j] = acc; }
}
"""
    assert omp_simd_inner(src, "f") is None


def test_unroll_marks_innermost_loops_and_updates_factor():
    out = unroll(ROWSUM, 4, "f")
    m = model(out)
    assert pragmas_of(m) == {3: [], 6: ["GCC unroll 4"]}
    again = unroll(out, 8, "f")
    assert pragmas_of(model(again))[6] == ["GCC unroll 8"]
    assert unroll(again, 8, "f") is None
    assert compiles(again)
    # g++ allows no pragma between `omp simd` and its loop: simd replaces the unroll pragma,
    # and unroll leaves simd loops alone
    vec = omp_simd_inner(again, "f")
    assert pragmas_of(model(vec))[6] == ["omp simd reduction(+ : acc)"]
    assert unroll(vec, 4, "f") is None
    assert compiles(vec, "-fopenmp")


MATMUL = """
void f(const float* a, const float* b, float* c, int64_t m, int64_t k, int64_t n) {
    for (int64_t i = 0; i < m; ++i) {
        for (int64_t j = 0; j < n; ++j) {
            float acc = 0.0f;
            for (int64_t q = 0; q < k; ++q) {
                acc += a[i * k + q] * b[q * n + j];
            }
            c[i * n + j] = acc;
        }
    }
}
"""


def test_interchange_turns_ijk_into_ikj():
    out = interchange(MATMUL, "f")
    m = model(out)
    i = m.forest[0]
    # versioned on the row length: i-k-j for n >= 8, the original i-j-k below
    test = next(n for n in walk(i.body) if n.type == "if_statement")
    assert m.src.text_of(test.child_by_field_name("condition")) == "(n >= 8)"
    assert [lp.var for lp in i.children] == ["j", "q", "j"]
    zero, q, small = i.children
    assert [lp.var for lp in q.children] == ["j"]
    assert "c[i * n + j] = 0.0f;" in m.src.text_of(zero.body)
    inner = m.src.text_of(q.children[0].body)
    assert "c[i * n + j] += a_q * b[q * n + j];" in inner
    assert "const float a_q = a[i * k + q];" in m.src.text_of(q.body)
    assert in_small_path(small.node) and [c.var for c in small.children] == ["q"]
    assert not in_small_path(q.node)
    assert interchange(out, "f") is None
    assert compiles(out)
    # simd vectorizes the interchanged inner loops, not the short-row path
    vec = model(omp_simd_inner(out, "f"))
    marked = [lp.var for lp in vec.loops if pragmas_before(lp.node)]
    assert marked == ["j", "j"]


def test_interchange_refuses_unit_stride_and_non_matmul_nests():
    transposed_b = MATMUL.replace("b[q * n + j]", "b[j * k + q]")
    assert interchange(transposed_b, "f") is None  # k is already the unit-stride index
    scaled = MATMUL.replace("c[i * n + j] = acc;", "c[i * n + j] = acc * 2.0f;")
    assert interchange(scaled, "f") is None  # the store is not a plain accumulator store
    reads_c = MATMUL.replace("a[i * k + q] * b[q * n + j]", "c[q] * b[q * n + j]")
    assert interchange(reads_c, "f") is None  # the product reads the output


# C = A B (or C += A B) for every shape in SHAPES, against a double-precision reference;
# exits non-zero on the first wrong element
MATMUL_DRIVER = """
#include <cstdio>
#include <cmath>
#include <vector>
int main() {
    const int64_t shapes[][3] = {SHAPES};
    for (const auto& s : shapes) {
        const int64_t m = s[0], k = s[1], n = s[2];
        std::vector<float> a(m * k), b(k * n), c(m * n + 8, -7.0f);
        for (int64_t x = 0; x < m * k; ++x) a[x] = float((x * 7 + 3) % 13) / 13.0f - 0.5f;
        for (int64_t x = 0; x < k * n; ++x) b[x] = float((x * 5 + 1) % 11) / 11.0f - 0.5f;
        for (int64_t x = 0; x < m * n; ++x) c[x] = ACCUMULATE ? float(x % 3) : -7.0f;
        std::vector<float> c0(c);
        f(a.data(), b.data(), c.data(), m, k, n);
        for (int64_t i = 0; i < m; ++i)
            for (int64_t j = 0; j < n; ++j) {
                double want = ACCUMULATE ? c0[i * n + j] : 0.0;
                for (int64_t q = 0; q < k; ++q) want += double(a[i * k + q]) * b[q * n + j];
                if (!(std::fabs(want - c[i * n + j]) <= 1e-4)) {  // NaN fails too
                    std::printf("m=%ld k=%ld n=%ld c[%ld][%ld]=%g want %g\\n", (long)m,
                                (long)k, (long)n, (long)i, (long)j, c[i * n + j], want);
                    return 1;
                }
            }
        for (int64_t x = m * n; x < m * n + 8; ++x)
            if (c[x] != -7.0f) { std::printf("wrote past the end\\n"); return 1; }
    }
    return 0;
}
"""
# m < RB, m % RB != 0, n < 8 (the short-row path), n < JB, n % JB != 0, one row, k = 1
BLOCK_SHAPES = [(1, 3, 9), (3, 5, 17), (4, 4, 16), (5, 1, 8), (7, 9, 7), (13, 6, 33),
                (16, 16, 16), (31, 37, 29), (2, 3, 1), (9, 2, 48)]


def runs_correctly(tmp_path, src: str, shapes, *, accumulate: bool = False,
                   flags: tuple[str, ...] = ("-O2", "-fopenmp-simd")) -> str:
    """Compile the kernel with the driver (real g++), run it: '' when every element is
    right, otherwise what went wrong."""
    driver = MATMUL_DRIVER.replace("SHAPES", ", ".join(f"{{{m}, {k}, {n}}}"
                                                       for m, k, n in shapes))
    driver = driver.replace("ACCUMULATE", "true" if accumulate else "false")
    path = tmp_path / "mm.cpp"
    path.write_text("#include <cstdint>\n" + src + driver)
    exe = tmp_path / "mm"
    r = subprocess.run(["g++", "-std=c++17", *flags, str(path), "-o", str(exe)],
                       capture_output=True, text=True, check=False)
    if r.returncode != 0:
        return r.stderr[-2000:]
    r = subprocess.run([str(exe)], capture_output=True, text=True, check=False, timeout=60)
    return "" if r.returncode == 0 else r.stdout or f"exit {r.returncode}"


def test_register_block_unroll_and_jams_the_interchanged_rows(tmp_path):
    ikj = interchange(MATMUL, "f")
    out = register_block(ikj, "f")
    assert out is not None
    m = model(out)
    # a float C: its columns four 32-byte vectors wide (a double C: 16, below)
    assert "#define RB 4" in out and "#define JB 32" in out
    assert "#define JB 16" in register_block(ikj.replace("float", "double"), "f")
    # versioned on the row length as before: blocked rows, then the rows left over, for
    # n >= 8; the original i-j-k below
    blocked, rest, small = [lp for lp in m.loops if lp.var == "i"]
    assert m.src.text_of(blocked.step) == "RB" and m.src.text_of(blocked.end) == "i_rb"
    assert "const int64_t i_rb = m / RB * RB;" in out
    assert m.src.text_of(rest.start) == "i_rb" and REST_MARK in m.src.text_of(rest.body)
    assert in_small_path(small.children[0].node)
    # full chunks: RB x JB accumulators, B's element feeds every row, C stored once
    chunk = blocked.children[0]
    assert m.src.text_of(chunk.end) == "" and "j0 + JB <= n" in m.src.text_of(chunk.node)
    body = m.src.text_of(chunk.body)
    assert "float acc2[RB][JB];" in body
    assert "acc2[r][j - j0] += a_q * b[q * n + j];" in body
    assert "const float a_q = a[(i + r) * k + q];" in body
    assert "c[(i + r) * n + j] = acc2[r][j - j0];" in body
    # every innermost loop of the blocked rows is an omp simd loop over j, the row loops
    # fully unrolled
    inner = [lp for lp in m.loops if not lp.children and lp.node.start_byte >
             blocked.node.start_byte and lp.node.end_byte <= blocked.node.end_byte]
    assert len(inner) == 5 and all(lp.var == "j" for lp in inner)
    assert all(pragmas_of(m)[m.src.line_of(lp.node)] == ["omp simd"] for lp in inner)
    assert all(pragmas_of(m)[m.src.line_of(lp.node)] == ["GCC unroll 64"]
               for lp in m.loops if lp.var == "r")
    assert register_block(out, "f") is None  # the leftover rows are not blocked again
    assert compiles(out, "-fopenmp-simd")
    assert runs_correctly(tmp_path, out, BLOCK_SHAPES) == ""
    # other block sizes, odd ones included, and -O3 -march=native
    for rb, jb in ((3, 8), (1, 16), (8, 32)):
        other = out.replace("#define RB 4", f"#define RB {rb}").replace(
            "#define JB 16", f"#define JB {jb}")
        assert runs_correctly(tmp_path, other, BLOCK_SHAPES,
                              flags=("-O3", "-march=native", "-fopenmp")) == "", (rb, jb)


def test_register_block_keeps_an_accumulating_threaded_nest_correct(tmp_path):
    """Hand-written i-k-j without a zero loop (C += A B), the row loop threaded and offset,
    columns starting at 0 with a scaled A element: the accumulators start from C, the
    threaded pragma goes to the blocked rows, the leftover rows run serially."""
    src = """
void f(const float* a, const float* b, float* c, int64_t m, int64_t k, int64_t n) {
#pragma omp parallel for schedule(static)
    for (int64_t i = 1; i < m; ++i) {
        for (int64_t q = 0; q < k; ++q) {
            const float aiq = 0.5f * a[i * k + q];
            for (int64_t j = 0; j < n; ++j) {
                c[i * n + j] += b[q * n + j] * aiq;
            }
        }
    }
}
"""
    out = register_block(src, "f", rows="ROWS", cols="COLS", rows_default=3,
                         cols_default=8)
    assert out is not None and "#define ROWS 3" in out and "#define COLS 8" in out
    m = model(out)
    tops = m.forest
    assert [lp.var for lp in tops] == ["i", "i"]
    assert pragmas_of(m)[m.src.line_of(tops[0].node)] == ["omp parallel for schedule(static)"]
    assert pragmas_of(m)[m.src.line_of(tops[1].node)] == []
    assert "acc[r][j - j0] = c[(i + r) * n + j];" in out
    assert "const int64_t i_rows = 1 + (m - 1) / ROWS * ROWS;" in out
    assert compiles(out, "-fopenmp")
    # the same C as the original, row 0 and the threaded rows included
    assert runs_correctly(tmp_path, _side_by_side(out, src), BLOCK_SHAPES,
                          flags=("-O2", "-fopenmp")) == ""


def _side_by_side(blocked: str, original: str) -> str:
    """A kernel `f` for the driver: runs the blocked code and the original on copies of
    C (C starts from values, not zero) and computes C = A B only where the two agree."""
    return ("#include <vector>\n#include <cmath>\n"
            + blocked.replace("void f(", "void f_blocked(")
            + original.replace("void f(", "void f_orig(") + """
void f(const float* a, const float* b, float* c, int64_t m, int64_t k, int64_t n) {
    std::vector<float> c1(m * n), c2(m * n);
    for (int64_t x = 0; x < m * n; ++x) c1[x] = c2[x] = float(x % 5) - 2.0f;
    f_blocked(a, b, c1.data(), m, k, n);
    f_orig(a, b, c2.data(), m, k, n);
    for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < n; ++j) {
            float s = 0.0f;
            for (int64_t q = 0; q < k; ++q) s += a[i * k + q] * b[q * n + j];
            c[i * n + j] = std::fabs(c1[i * n + j] - c2[i * n + j]) <= 1e-5f ? s : NAN;
        }
}
""")


def test_register_block_refuses_what_it_does_not_recognize():
    ikj = interchange(MATMUL, "f")
    assert register_block(MATMUL, "f") is None  # i-j-k: interchange first
    assert register_block(ROWSUM, "f") is None
    assert register_block(TRANSPOSE, "f") is None
    # B's row depends on the row of C: nothing to share between rows
    assert register_block(ikj.replace("a_q * b[q * n + j]", "a_q * b[i * n + j]"), "f") is None
    # the product reads C
    assert register_block(ikj.replace("a_q * b[q * n + j]", "a_q * c[q * n + j]"), "f") is None
    # C's element depends on k / on the row only
    assert register_block(ikj.replace("c[i * n + j] += ", "c[q * n + j] += "), "f") is None
    assert register_block(ikj.replace("c[i * n + j] += ", "c[i] += "), "f") is None
    # rows overlap in C (c[i + j]): interleaving them would change what each one adds up
    assert register_block(ikj.replace("c[i * n + j]", "c[i + j]"), "f") is None
    # the zero loop clears other columns than the k loop accumulates
    assert register_block(ikj.replace("c[i * n + j] = 0.0f;", "c[i * n + j + 1] = 0.0f;"),
                          "f") is None
    # not an FMA-shaped update, not a scalar hoisted per k step
    assert register_block(ikj.replace("+= a_q * b[q * n + j]", "= a_q * b[q * n + j]"),
                          "f") is None
    assert register_block(ikj.replace("+= a_q * b[q * n + j]", "+= a_q + b[q * n + j]"),
                          "f") is None
    # the version test changes with the row
    assert register_block(ikj.replace("if (n >= 8)", "if (i >= 8)"), "f") is None
    # a bound that moves with the row (a triangular product)
    assert register_block(ikj.replace("q < k; ++q) {\n                const",
                                      "q < i; ++q) {\n                const"), "f") is None
    # a name the knob would shadow
    assert register_block(ikj.replace("int64_t n)", "int64_t n, int RB)"), "f") is None


TRANSPOSE = """
void f(const float* x, float* y, int64_t rows, int64_t cols) {
    for (int64_t i = 0; i < rows; ++i) {
        for (int64_t j = 0; j < cols; ++j) {
            y[j * rows + i] = x[i * cols + j];
        }
    }
}
"""


def test_tile_blocks_a_strided_copy_with_a_tile_knob():
    out = tile(TRANSPOSE, "f", knob="TILE", default=16)
    m = model(out)
    nest = []
    lp = m.forest[0]
    while lp is not None:
        nest.append((lp.var, m.src.text_of(lp.step) if lp.step is not None else "1"))
        lp = lp.children[0] if lp.children else None
    # inside a tile the innermost loop walks the written array y contiguously
    assert nest == [("i0", "TILE"), ("j0", "TILE"), ("j", "1"), ("i", "1")]
    assert "#define TILE 16" in out
    assert tile(out, "f") is None  # already tiled
    assert compiles(out)
    keep = model(tile(TRANSPOSE, "f", inner="keep"))
    assert [x.var for x in keep.loops] == ["i0", "j0", "i", "j"]
    # threads share out tiles of both tile loops (a thin shape still has work for all)
    par = model(omp_parallel_outer(out, "f", min_work=1))
    assert pragmas_of(par)[par.src.line_of(par.forest[0].node)] == [
        "omp parallel for collapse(2) schedule(static)"]
    # stores with a stride are not vectorized (scatters); the tiled inner loop is contiguous
    assert omp_simd_inner(TRANSPOSE, "f") is None
    assert "#pragma omp simd" in omp_simd_inner(out, "f")


def test_tile_refuses_an_in_place_transpose():
    inplace = TRANSPOSE.replace("const float* x, float* y", "float* y").replace(
        "x[i * cols + j]", "y[i * cols + j]")
    assert tile(inplace, "f") is None


THREE_PASSES = """
void f(const float* x, const float* r, const float* s, float* y, int64_t rows, int64_t cols) {
    for (int64_t i = 0; i < rows; ++i) {
        for (int64_t j = 0; j < cols; ++j) {
            y[i * cols + j] = x[i * cols + j] + r[i * cols + j];
        }
    }
    // pass 2
    for (int64_t i = 0; i < rows; ++i) {
        for (int64_t j = 0; j < cols; ++j) {
            float v = y[i * cols + j];
            y[i * cols + j] = v * v;
        }
    }
    for (int64_t i = 0; i < rows; ++i) {
        for (int64_t j = 0; j < cols; ++j) {
            float v = y[i * cols + j] * s[j];
            y[i * cols + j] = v;
        }
    }
}
"""


def test_fusion_merges_passes_into_one_loop_nest():
    out = fuse_loops(THREE_PASSES, "f")
    m = model(out)
    assert len(m.forest) == 1 and len(m.forest[0].children) == 1
    body = m.src.text_of(m.forest[0].children[0].body)
    assert body.index("x[i * cols + j] + r") < body.index("float v =") < body.index("float v_2")
    assert "// pass 2" in body
    assert compiles(out)


@pytest.mark.parametrize("old, new, why", [
    ("float v = y[i * cols + j];\n            y[i * cols + j] = v * v;",
     "y[i * cols + j] = y[(i + 1) * cols + j];", "reads the next row, written later"),
    ("float v = y[i * cols + j];\n            y[i * cols + j] = v * v;",
     "y[j * rows + i] = 1.0f;", "writes a transposed position"),
    (("for (int64_t i = 0; i < rows; ++i) {\n        for (int64_t j = 0; j < cols; ++j) {\n"
     "            float v = y[i * cols + j];"),
     ("for (int64_t i = 1; i < rows; ++i) {\n        for (int64_t j = 0; j < cols; ++j) {\n"
     "            float v = y[i * cols + j];"), "a different range"),
])
def test_fusion_refuses_dependences(old, new, why):
    src = THREE_PASSES.replace(old, new, 1)
    assert src != THREE_PASSES
    out = fuse_loops(src, "f")
    if out is not None:  # the two legal passes may still fuse; the illegal one must not
        m = model(out)
        assert len(m.forest) >= 2, why


def test_fusion_refuses_a_scalar_computed_by_the_first_loop():
    src = """
void f(const float* x, float* y, int64_t n) {
    float sum = 0.0f;
    for (int64_t j = 0; j < n; ++j) { y[j] = x[j]; sum += x[j]; }
    for (int64_t j = 0; j < n; ++j) { y[j] = y[j] / sum; }
}
"""
    assert fuse_loops(src, "f") is None


def test_fusion_works_inside_a_threaded_region():
    threaded = omp_parallel_outer(THREE_PASSES, "f", min_work=1000)
    out = fuse_loops(threaded, "f")
    m = model(out)
    tops = m.forest
    assert len(tops) == 2  # one fused nest in each version
    assert [pragma_text(m.src, p) for p in pragmas_before(tops[0].node)] == [
        "omp for schedule(static)"]
    assert all(len(lp.children) == 1 for lp in tops)
    assert compiles(out, "-fopenmp")


def test_vector_math_replaces_float_libm_calls_in_loops():
    src = """
void f(const float* x, float* y, int64_t n) {
    float first = std::exp(x[0]);
    for (int64_t j = 0; j < n; ++j) {
        y[j] = std::exp(x[j] - first) + erff(x[j] * 0.5f) + std::exp(x[j] * 0.5);
    }
}
"""
    out = vector_math(src, "f")
    m = model(out)
    fns = [n for n in walk(m.src.root) if n.type == "function_definition"]
    from kernelcrew.csource.syntax import function_name

    assert [function_name(f) for f in fns] == ["kc_as_int", "kc_as_float", "kc_expf", "kc_erff",
                                               "f"]
    body = m.src.text_of(m.forest[0].body)
    assert "kc_expf(x[j] - first)" in body and "kc_erff(x[j] * 0.5f)" in body
    assert "std::exp(x[j] * 0.5)" in body  # a double argument keeps libm
    assert "float first = std::exp(x[0]);" in out  # outside any loop: not hot
    assert compiles(out)
    assert vector_math(src.replace("float", "double"), "f") is None


ODD = [
    "void f(float* y, int64_t n) { int64_t i = 0; while (i < n) { y[i] = 0; ++i; } }",
    "#define N 16\nvoid f(float* y) { for (int k = 0; k < N; k += 2) y[k] = 1.0f; }",
    "template <int B> void g(float* y) { y[0] = B; }\nvoid f(float* y) { g<4>(y); }",
    "void f(float* y, int64_t n) { for (int64_t i = n; i > 0; --i) y[i - 1] = 0; }",
    "void f(float* y, int64_t n) { for (;;) { if (n-- < 0) break; y[n] = 1; } }",
    "void f(float (*y)[4], int64_t n) { for (int64_t i = 0; i < n; ++i) y[i][0] = 1; }",
    ("void f(float* y, const int* idx, int64_t n) { for (int64_t i = 0; i < n; ++i) "
    "y[idx[i]] = 1; }"),
]


@pytest.mark.parametrize("src", ODD)
def test_transforms_refuse_or_stay_valid_on_unusual_code(src):
    for fn in (omp_parallel_outer, omp_simd_inner, interchange, tile, fuse_loops, vector_math,
               add_restrict, lambda s, e: unroll(s, 4, e)):
        out = fn(src, "f")
        if out is not None:
            assert not Source(out).has_errors()
            assert compiles(out, "-fopenmp"), (fn, out)
    # a scatter through an index array is never threaded or vectorized
    if "idx[i]" in src:
        assert omp_parallel_outer(src, "f") is None and omp_simd_inner(src, "f") is None


def test_simd_on_a_threaded_innermost_loop_uses_the_combined_construct():
    src = "void f(const float* x, float* y, int64_t n) {\n" \
          "    for (int64_t i = 0; i < n; ++i) y[i] = x[i] * 2.0f;\n}\n"
    out = omp_simd_inner(omp_parallel_outer(src, "f", min_work=100), "f")
    m = model(out)
    assert [[pragma_text(m.src, p) for p in pragmas_before(lp.node)] for lp in m.loops] == [
        ["omp parallel for simd schedule(static)"], ["omp simd"]]
    assert omp_simd_inner(out, "f") is None
    assert compiles(out, "-fopenmp")


def test_parallel_takes_the_pragmas_of_the_loops_it_versions():
    """A pragma already on a loop that omp_parallel versions moves with the loop (in front of
    the inserted `if` it does not compile): the serial copy keeps it, the threaded copy
    merges `omp simd` into the worksharing pragma and leaves loop hints out (g++ takes no
    other pragma next to an OpenMP one)."""
    one = "void f(const float* x, float* y, int64_t n) {\n" \
          "    for (int64_t i = 0; i < n; ++i) y[i] = x[i] * 2.0f;\n}\n"
    out = omp_parallel_outer(omp_simd_inner(one, "f"), "f", min_work=100)
    assert out == omp_simd_inner(omp_parallel_outer(one, "f", min_work=100), "f")
    m = model(out)
    assert [[pragma_text(m.src, p) for p in pragmas_before(lp.node)] for lp in m.loops] == [
        ["omp parallel for simd schedule(static)"], ["omp simd"]]
    assert compiles(out, "-fopenmp")
    m = model(omp_parallel_outer(unroll(one, 4, "f"), "f", min_work=100))
    assert list(pragmas_of(m).values()) == [["omp parallel for schedule(static)"],
                                            ["GCC unroll 4"]]
    assert compiles(m.src.text, "-fopenmp")
    # two passes share one region whether or not simd came first
    two = """
void f(const float* x, float* y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] = x[i] + 1.0f;
    for (int64_t i = 0; i < n; ++i) y[i] = y[i] * 2.0f;
}
"""
    out = omp_parallel_outer(omp_simd_inner(two, "f"), "f", min_work=10)
    assert out == omp_simd_inner(omp_parallel_outer(two, "f", min_work=10), "f")
    m = model(out)
    assert [pragma_text(m.src, n) for n in walk(m.body) if n.type == "preproc_call"] == [
        "omp parallel", "omp for simd schedule(static)", "omp for simd schedule(static)",
        "omp simd", "omp simd"]
    assert compiles(out, "-fopenmp")
    # a pragma the threaded copy could not carry: the loop is not threaded
    other = one.replace("    for", "#pragma omp loop\n    for")
    assert compiles(other, "-fopenmp") and omp_parallel_outer(other, "f") is None
