"""Threads on reduction loops (`omp parallel for reduction(op : s)`) and reductions written
as chains (`s = s + a*b + c*d`, the BLAS-style unrolled form), on small sources in several
styles; loops where each thread's private copy would change the result are not threaded."""

from __future__ import annotations

import subprocess

import pytest

from kernelcrew.agents.transforms import omp_parallel_outer, omp_simd_inner
from kernelcrew.agents.transforms.analysis.dependence import check_loop
from kernelcrew.csource.affine import FunctionModel
from kernelcrew.csource.syntax import Source, find_function, pragma_text, walk


def pragmas(src: str) -> list[str]:
    s = Source(src)
    assert not s.has_errors(), src
    return [pragma_text(s, n) for n in walk(s.root) if n.type == "preproc_call"
            and pragma_text(s, n).startswith("omp")]


def run(src: str, entry_call: str, tmp_path, *flags: str) -> str:
    """Compile `src` with a main that prints `entry_call`'s result; the program's output."""
    prog = tmp_path / "p.cpp"
    prog.write_text("#include <cmath>\n#include <cstdint>\n#include <cstdio>\n" + src + """
int main() {
    static float x[3001], y[3001];
    for (int i = 0; i < 3001; ++i) { x[i] = (float)((i * 37) % 101) / 50.0f - 1.0f;
                                     y[i] = (float)((i * 11) % 23) / 10.0f; }
    std::printf("%.3f\\n", (double)(""" + entry_call + """));
    return 0;
}
""")
    exe = tmp_path / "p"
    subprocess.run(["g++", "-O2", *flags, str(prog), "-o", str(exe)], check=True)
    return subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout


DOT = """
float f(const float* x, const float* y, int n) {
    float s = 0.0f;
    for (int i = 0; i < n; i++) s += x[i] * y[i];
    return s;
}
"""

# reference-BLAS style: int counters declared before the loops, a clean-up loop, the main
# loop unrolled by 4 into one running sum written as a chain
UNROLLED = """
float f(const float* dx, const float* dy, int n) {
    float dtemp = 0.0f;
    int i, m = n % 4;
    for (i = 0; i < m; i++) dtemp = dtemp + dx[i] * dy[i];
    for (i = m; i < n; i += 4) {
        dtemp = dtemp + dx[i] * dy[i] + dx[i + 1] * dy[i + 1] + dx[i + 2] * dy[i + 2] +
                dx[i + 3] * dy[i + 3];
    }
    return dtemp;
}
"""

MAXABS = """
float f(const float* x, const float* y, int64_t n) {
    float m = 0.0f;
    for (int64_t i = 0; i < n; ++i) m = fmaxf(m, fabsf(x[i] - y[i]));
    return m;
}
"""


def test_a_sum_loop_is_threaded_with_a_reduction_clause(tmp_path):
    out = omp_parallel_outer(DOT, "f", min_work=1000)
    assert out is not None
    assert pragmas(out) == ["omp parallel for reduction(+ : s) schedule(static)"]
    assert "if (n >= 1000)" in out  # the serial copy below the threshold
    assert omp_parallel_outer(out, "f") is None  # threaded already
    # the same sum as the serial code, threaded or not (min_work=1: always threaded)
    serial = run(DOT, "f(x, y, 3001)", tmp_path)
    threaded = omp_parallel_outer(DOT, "f", min_work=1)
    assert run(threaded, "f(x, y, 3001)", tmp_path, "-fopenmp") == serial


def test_the_blas_style_unrolled_chain_is_a_reduction(tmp_path):
    s = Source(UNROLLED)
    m = FunctionModel(s, find_function(s, "f"))
    main = m.loops[1]
    assert check_loop(m, main, allow_reductions=True).reductions == {"dtemp": "+"}
    vec = omp_simd_inner(UNROLLED, "f")
    assert pragmas(vec) == ["omp simd reduction(+ : dtemp)"] * 2
    out = omp_parallel_outer(vec, "f", min_work=1000)
    # both passes in one region, the work of both in the test, the simd clause not doubled
    assert pragmas(out) == ["omp parallel", "omp for simd reduction(+ : dtemp) schedule(static)",
                            "omp for simd reduction(+ : dtemp) schedule(static)",
                            "omp simd reduction(+ : dtemp)", "omp simd reduction(+ : dtemp)"]
    assert "if ((long long)m + n >= 1000)" in out
    # simd after threads: the worksharing pragma's reduction is not named twice either
    later = omp_simd_inner(omp_parallel_outer(UNROLLED, "f", min_work=1000), "f")
    assert later == out
    serial = run(UNROLLED, "f(x, y, 3001)", tmp_path)
    threaded = omp_parallel_outer(vec, "f", min_work=1)
    assert run(threaded, "f(x, y, 3001)", tmp_path, "-fopenmp") == serial


def test_a_max_reduction_is_threaded_with_max(tmp_path):
    out = omp_parallel_outer(MAXABS, "f", min_work=1)
    assert pragmas(out) == ["omp parallel for reduction(max : m) schedule(static)"]
    assert run(out, "f(x, y, 3001)", tmp_path, "-fopenmp") == run(MAXABS, "f(x, y, 3001)",
                                                                 tmp_path)


@pytest.mark.parametrize("body, why", [
    ("for (int i = 0; i < n; i++) { s += x[i]; y[i] = s; }", "a scan: s is read while reduced"),
    ("for (int i = 0; i < n; i++) s = s * 0.5f + x[i];", "a recurrence, not a reduction"),
    ("for (int i = 0; i < n; i++) s = x[i] - s;", "s is subtracted: the sign alternates"),
    ("for (int i = 0; i < n; i++) s = s + x[i] * s;", "s on both sides of a product"),
    ("for (int i = 0; i < n; i++) { if (x[i] > s) s = x[i]; }",
     "an if-max: rewritten by simd first, not threaded as it stands"),
    ("for (int i = 0; i < n; i++) y[0] += x[i];", "the sum lives in memory, not a scalar"),
])
def test_loops_that_are_not_reductions_are_not_threaded(body, why):
    src = f"void f(const float* x, float* y, int n) {{\n    float s = 0.0f;\n    {body}\n" \
          f"    y[1] = s;\n}}\n"
    assert omp_parallel_outer(src, "f", min_work=1) is None, why


def test_a_reduction_into_a_reference_or_a_pointer_target_is_not_threaded():
    by_ref = "void f(const float* x, float& s, int n) {\n" \
             "    for (int i = 0; i < n; i++) s += x[i];\n}\n"
    assert omp_parallel_outer(by_ref, "f", min_work=1) is None
    through = "void f(const float* x, float* s, int n) {\n" \
              "    for (int i = 0; i < n; i++) *s += x[i];\n}\n"
    assert omp_parallel_outer(through, "f", min_work=1) is None


def test_a_threaded_reduction_loop_keeps_its_worksharing_pragma(tmp_path):
    """Inside a parallel region, the loops with `omp for reduction` are the threads'
    shares: accumulators (which rewrite a reduction loop into a block) must leave them be,
    or every thread would sum the whole range into the shared total."""
    from kernelcrew.agents.transforms import accumulators

    threaded = omp_parallel_outer(UNROLLED, "f", min_work=1)
    assert pragmas(threaded)[:2] == ["omp parallel",
                                     "omp for reduction(+ : dtemp) schedule(static)"]
    out = accumulators(threaded, "f", 4)
    if out is not None:  # only the serial copy's loop may take them
        assert pragmas(out).count("omp for reduction(+ : dtemp) schedule(static)") == 2
    final = out or threaded
    assert run(final, "f(x, y, 3001)", tmp_path, "-fopenmp") == run(UNROLLED, "f(x, y, 3001)",
                                                                     tmp_path)
