"""Inlining value-returning helpers called in the entry's loops (`inline_calls`), and the
loop moves that see a nest through it; helpers and calls where inlining would change the
meaning are left alone."""

from __future__ import annotations

import subprocess

import pytest

from kernelcrew.agents.transforms import apply_transform, inline_calls
from kernelcrew.csource.syntax import Source

HEAD = "/* kernelcrew\nentry: f\nflags: [-O2]\n*/\n#include <cstdint>\n"

# a statistics-routine style: the inner loop in a static helper, `int` sizes, casts
COLUMNS = """
static float column_total(const float* data, int rows, int cols, int col) {
    float total = 0.0f;
    for (int r = 0; r < rows; r++) {
        total += data[r * cols + col];
    }
    return total;
}

void f(const float* x, float* out, int64_t rows, int64_t cols) {
    for (int c = 0; c < (int)cols; c++) {
        out[c] = column_total(x, (int)rows, (int)cols, c);
    }
}
"""

# an inference-runtime style: a dot helper given a row pointer, the result scaled
ROWS = """
static int32_t dot_q(const int32_t* row, const int32_t* act, int64_t n) {
    int32_t sumi = 0;
    for (int64_t j = 0; j < n; j++) sumi += row[j] * act[j];
    return sumi;
}

void f(const int32_t* w, const int32_t* x, const float* scale, float* y, int64_t m,
       int64_t n) {
    for (int64_t i = 0; i < m; i++)
        y[i] = scale[i] * (float)dot_q(w + i * n, x, n);
}
"""


def run(src: str, call: str, tmp_path, kind: str = "float") -> str:
    prog = tmp_path / "p.cpp"
    prog.write_text("#include <cstdint>\n#include <cstdio>\n" + src + f"""
int main() {{
    static {kind} a[64 * 48], b[64];
    static float s[64], out[64];
    for (int i = 0; i < 64 * 48; ++i) a[i] = ({kind})((i * 7) % 13) - ({kind})6;
    for (int i = 0; i < 64; ++i) {{ b[i] = ({kind})((i * 5) % 11); s[i] = 0.5f + i; }}
    {call};
    for (int i = 0; i < 64; ++i) std::printf("%.4f ", (double)out[i]);
    return 0;
}}
""")
    exe = tmp_path / "p"
    subprocess.run(["g++", "-O2", "-fopenmp", str(prog), "-o", str(exe)], check=True)
    return subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout


def test_a_column_helper_is_inlined_and_the_nest_interchanged(tmp_path):
    got = inline_calls(COLUMNS, "f")
    assert got is not None and not Source(got).has_errors()
    body = got[got.index("void f"):]
    assert "column_total(" not in body
    assert "total_1 += x[r_1 * ((int)cols) + c];" in body  # names fresh, casts kept
    assert "out[c] = total_1;" in body
    assert inline_calls(got, "f") is None  # nothing left to inline
    new = apply_transform("interchange", HEAD + COLUMNS)
    assert new is not None and "out[c] += x[r_1 * ((int)cols) + c];" in new
    kernel = new[new.index("*/") + 2:]
    call = "f(a, out, 48, 64)"
    assert run(kernel, call, tmp_path) == run(COLUMNS, call, tmp_path)


def test_a_dot_helper_with_a_row_pointer_argument_is_jammed_and_threaded(tmp_path):
    got = inline_calls(ROWS, "f")
    body = got[got.index("void f"):]
    # the braceless loop body got braces; the pointer expression is evaluated once
    assert "const int32_t* row_1 = w + i * n;" in body
    assert "y[i] = scale[i] * (float)sumi_1;" in body
    jam = apply_transform("unroll_and_jam", HEAD + ROWS)
    assert jam is not None and "jammed by 4" in jam
    threads = apply_transform("omp_parallel", HEAD + ROWS)
    assert threads is not None and "omp parallel for" in threads
    call = "f(a, b, s, out, 64, 48)"
    want = run(ROWS, call, tmp_path, "int32_t")
    for new in (jam, threads):
        assert run(new[new.index("*/") + 2:], call, tmp_path, "int32_t") == want


def test_an_argument_of_another_type_is_converted_as_the_call_converts_it(tmp_path):
    src = """
static float half(float v) { return v / 2; }
void f(const float* x, float* out, int n) {
    for (int i = 0; i < n; i++) out[i] = x[i] + half(i);
}
"""
    got = inline_calls(src, "f")
    assert "float v_1 = i;" in got  # not `i / 2`, an integer division
    call = "f(s, out, 64)"
    assert run(got, call, tmp_path) == run(src, call, tmp_path)


@pytest.mark.parametrize("helper, use, why", [
    ("static float g(float* p, int i) { p[i] = 0; return 1.0f; }",
     "out[i] = g(out, i);", "writes through its pointer"),
    (("static float g(const float* p, int i) { for (int k = 0; k < i; k++) "
     "if (p[k] < 0) return 0; return p[i]; }"),
     "out[i] = g(x, i);", "a return inside a loop"),
    (("static float g(const float* p, int i) { if (i < 0) return 0; else i = 1; "
     "return p[i]; }"), "out[i] = g(x, i);", "an early return with an else"),
    (("static float g(const float* p, int i) { if (i < 0) { i = 0; return p[1]; } "
     "return p[i]; }"), "out[i] = g(x, i);", "an early return after other statements"),
    ("static float g(const float* p, int i) { return i ? g(p, i - 1) : p[0]; }",
     "out[i] = g(x, i);", "recursive"),
    ("static float g(const float* p, int i) { return p[i]; }",
     "out[i] = i > 2 ? g(x, i) : 0.0f;", "evaluated only when a condition holds"),
    ("static float g(const float* p, int i) { return p[i]; }",
     "out[i] = (i > 2 && g(x, i) > 0) ? 1.0f : 0.0f;", "short-circuited"),
    ("static float g(const float* p, int i) { return p[i]; }",
     "out[k++] = g(x, i);", "the statement has another side effect"),
    (("static float g(const float* p, int i) { static float last = 0; last += p[i]; "
      "return last; }"), "out[i] = g(x, i);", "a static local"),
    ("#define AT(j) p[j]\nstatic float g(const float* p, int i) { return AT(i); }",
     "out[i] = g(x, i);", "a macro names the parameter"),
])
def test_helpers_and_calls_that_would_change_meaning_are_not_inlined(helper, use, why):
    src = f"{helper}\nvoid f(const float* x, float* out, int n) {{\n    int k = 0;\n" \
          f"    for (int i = 0; i < n; i++) {{\n        {use}\n    }}\n    (void)k;\n}}\n"
    assert not Source(src).has_errors(), src
    assert inline_calls(src, "f") is None, why


def test_a_call_outside_any_loop_is_left_to_the_helper_moves():
    src = COLUMNS.replace("    for (int c = 0; c < (int)cols; c++) {\n"
                          "        out[c] = column_total(x, (int)rows, (int)cols, c);\n"
                          "    }", "    out[0] = column_total(x, (int)rows, (int)cols, 0);")
    assert "for (int c" not in src[src.index("void f"):]
    assert inline_calls(src, "f") is None


def test_a_helper_called_from_a_loop_is_threaded_at_its_caller_not_inside():
    """The entry's loop calls the helper per row: threading the helper's own loop would put
    a parallel region inside the caller's loop (nested: one thread, start-up paid per call);
    the caller's loop gets the threads, with the helper inlined."""
    src = HEAD + """
static float row_sum(const float* r, int n) {
    float s = 0.0f;
    for (int j = 0; j < n; j++) s += r[j];
    return s;
}

void f(const float* x, float* out, int64_t rows, int64_t cols) {
    for (int64_t i = 0; i < rows; i++) out[i] = row_sum(x + i * cols, (int)cols);
}
"""
    new = apply_transform("omp_parallel", src)
    assert new is not None
    helper = new[new.index("static float row_sum"):new.index("void f")]
    assert "omp" not in helper
    entry = new[new.index("void f"):]
    assert entry.count("#pragma omp parallel for schedule(static)") == 1
    assert "row_sum(" not in entry
    # the knob guard comes before the first function, so a helper could use it too
    assert new.index("#define OMP_MIN_WORK") < new.index("static float row_sum")


def test_a_helper_that_reads_what_the_loop_writes_keeps_the_loop_serial():
    """`y[i] = pair(y + i - 1)` reads y[i - 1], written by the iteration before: neither
    the call as it stands (a pointer into y handed to the helper) nor the inlined body may
    be threaded."""
    src = HEAD + """
static float pair(const float* p) { return p[0] + p[1]; }

void f(float* y, int64_t n) {
    for (int64_t i = 1; i < n - 1; i++) y[i] = pair(y + i - 1);
}
"""
    assert inline_calls(src[src.index("*/") + 2:], "f") is not None
    assert apply_transform("omp_parallel", src) is None
