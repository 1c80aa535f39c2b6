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
    tile,
    unroll,
    vector_math,
)
from kernelcrew.agents.transforms.analysis import FunctionModel
from kernelcrew.agents.transforms.common import in_small_path
from kernelcrew.agents.transforms.cst import (
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
    ("for (int64_t i = 0; i < n; ++i) s += x[i];", "scalar accumulator declared outside"),
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
    from kernelcrew.agents.transforms.cst import function_name

    assert [function_name(f) for f in fns] == ["kc_expf", "kc_erff", "f"]
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
