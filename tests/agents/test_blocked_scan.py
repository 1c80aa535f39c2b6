"""Blocked two-pass parallel scans (`blocked_scan`): prefix sums in several styles threaded
by blocks (one long scan, a few long rows) or by rows (many rows), each result compiled and
compared with the serial code; the loops where it would be wrong left alone, with the
reason. And the plain row threading (`omp_parallel`) of the library's cumsum_rows."""

from __future__ import annotations

import subprocess

import pytest

from kernelcrew.agents.transforms import apply_transform
from kernelcrew.agents.transforms.analysis.prefix_sums import scan_plan
from kernelcrew.agents.transforms.cpu.blocked_scan import blocked_scan
from kernelcrew.csource.affine import FunctionModel
from kernelcrew.csource.syntax import Source, find_function, pragma_text, walk
from tests.agents.conftest import baseline_text

MAIN = """
#include <cstdio>
#include <cmath>
int main() {
    const int64_t rows = ROWS, cols = COLS;
    static float x[ROWS * COLS], y[ROWS * COLS];
    static int32_t xi[ROWS * COLS], yi[ROWS * COLS];
    for (int64_t i = 0; i < rows * cols; ++i) {
        x[i] = (float)((i * 37) % 101) / 50.0f - 1.0f;
        xi[i] = (int32_t)((i * 13) % 7) - 3;
    }
    double r = (double)(ENTRY_CALL);
    double s = 0.0;
    long long si = 0;
    for (int64_t i = 0; i < rows * cols; ++i) { s += (double)y[i] * (double)((i % 7) + 1);
                                                si += (long long)yi[i] * ((i % 5) + 1); }
    std::printf("%.6e %lld %.6e\\n", s, si, r);
    return 0;
}
"""


def run(src: str, call: str, rows: int, cols: int, tmp_path, *flags: str) -> list[float]:
    """Compile with a main that calls `call` on rows x cols inputs; a weighted checksum of
    y (float) and yi (int), and the call's value."""
    body = src.split("*/\n", 1)[1] if src.startswith("/* kernelcrew") else src
    prog = tmp_path / "p.cpp"
    prog.write_text("#include <cstdint>\n#include <cstddef>\n" + body + MAIN.replace(
        "ENTRY_CALL", call).replace("ROWS", str(rows)).replace("COLS", str(cols)))
    exe = tmp_path / "p"
    subprocess.run(["g++", "-O2", "-fopenmp", *flags, str(prog), "-o", str(exe)], check=True,
                   capture_output=True, text=True)
    out = subprocess.run([str(exe)], capture_output=True, text=True, check=True,
                         env={"OMP_NUM_THREADS": "3", "PATH": "/usr/bin:/bin"})
    return [float(v) for v in out.stdout.split()]


def close(a: list[float], b: list[float], rel: float = 1e-5) -> bool:
    return all(abs(p - q) <= rel * max(1.0, abs(q)) for p, q in zip(a, b, strict=True))


def omp_pragmas(src: str) -> list[str]:
    s = Source(src)
    assert not s.has_errors(), src
    return [pragma_text(s, n) for n in walk(s.root) if n.type == "preproc_call"
            and pragma_text(s, n).startswith("omp")]


def reason(src: str, entry: str) -> str:
    s = Source(src)
    m = FunctionModel(s, find_function(s, entry))
    out = [scan_plan(m, lp) for lp in m.loops if not lp.children]
    assert out and all(isinstance(r, str) for r in out), out
    return out[0]


CUMSUM = baseline_text("cumsum_rows")
CALL = "(cumsum_rows(x, y, rows, cols), 0)"


@pytest.mark.parametrize("rows, cols", [(3, 70001), (40, 2000)])
def test_the_library_row_scan_walked_with_pointers(rows, cols, tmp_path):
    out = apply_transform("blocked_scan", CUMSUM)
    assert out is not None
    # many rows: the rows threaded whole; few: each row's blocks in parallel, two passes
    assert omp_pragmas(out) == ["omp parallel for schedule(static)", "omp parallel",
                                "omp for schedule(static)", "omp single",
                                "omp for schedule(static)", "omp simd"]
    assert "SCAN_MIN: 32768" in out and "SCAN_ROWS: 16" in out and "-fopenmp" in out
    serial = run(CUMSUM, CALL, rows, cols, tmp_path)
    for flags in ((), ("-DOMP_MIN_WORK=1",), ("-DSCAN_BLOCKS=7", "-DSCAN_MIN=100")):
        assert close(run(out, CALL, rows, cols, tmp_path, *flags), serial, 1e-4), flags
    assert apply_transform("blocked_scan", out) is None  # one of ours


def test_many_rows_are_threaded_by_the_plain_move_too():
    out = apply_transform("omp_parallel", CUMSUM)
    assert out is not None and omp_pragmas(out) == ["omp parallel for schedule(static)"]


# one long scan, `int` counters, the exclusive form (store, then add), the final sum
# returned: the running sum keeps its meaning after the loop
EXCLUSIVE = """
long long scan_ex(const int32_t* xi, int32_t* yi, int n) {
    long long s = 0;
    for (int i = 0; i < n; i++) {
        yi[i] = s;
        s += xi[i];
    }
    return s;
}
"""


def test_one_long_exclusive_integer_scan(tmp_path):
    out = blocked_scan(EXCLUSIVE, "scan_ex")
    assert out is not None
    assert "omp parallel" in omp_pragmas(out)
    call = "scan_ex(xi, yi, (int)(rows * cols))"
    serial = run(EXCLUSIVE, call, 1, 100003, tmp_path)
    # integers: exactly the same, threaded or not
    assert run(out, call, 1, 100003, tmp_path) == serial
    assert run(out, call, 1, 100003, tmp_path, "-DSCAN_BLOCKS=5") == serial
    assert run(out, call, 1, 1000, tmp_path) == run(EXCLUSIVE, call, 1, 1000, tmp_path)


# C89: counters before the loops, a row pointer, `acc = acc + v`, a double running sum;
# a static helper called per row from the entry
C89 = """
static double row_scan(const float* x, float* y, int n) {
    int j;
    double acc;
    acc = 0.0;
    for (j = 0; j < n; j++) {
        acc = acc + x[j] * 0.5f;
        y[j] = acc;
    }
    return acc + (double)(j - n);
}

double scan_rows(const float* x, float* y, int64_t rows, int64_t cols) {
    double t = 0.0;
    int r;
    for (r = 0; r < (int)rows; r++) {
        const float* xr = x + (int64_t)r * cols;
        float* yr = y + (int64_t)r * cols;
        t += row_scan(xr, yr, (int)cols);
    }
    return t;
}
"""


def test_a_helper_scan_with_c89_counters(tmp_path):
    out = blocked_scan(C89, "row_scan")
    assert out is not None
    assert "j = n;" in out  # the counter lives on after the loop: its final value
    call = "scan_rows(x, y, rows, cols)"
    serial = run(C89, call, 2, 80001, tmp_path)
    assert close(run(out, call, 2, 80001, tmp_path), serial, 1e-5)


@pytest.mark.parametrize("body, why", [
    # the array recurrence y[i] = y[i-1] + x[i]: a loop-carried dependence through memory,
    # no running sum in a scalar
    ("""void f(const float* x, float* y, long n) {
    for (long i = 1; i < n; i++) y[i] = y[i - 1] + x[i];
}""", "no running sum"),
    # the running sum also scaled before the store: pass 2 could not add a plain offset
    ("""void f(const float* x, float* y, long n) {
    float acc = 0.0f;
    for (long i = 0; i < n; i++) { acc += x[i]; y[i] = 2.0f * acc; }
}""", "other than by a store"),
    # a second carried scalar (a running max of the prefix sums)
    ("""void f(const float* x, float* y, float* top, long n) {
    float acc = 0.0f, best = 0.0f;
    for (long i = 0; i < n; i++) { acc += x[i]; y[i] = acc; best = acc > best ? acc : best; }
    *top = best;
}""", "not a running sum"),
    # two running sums in one loop: the move handles one
    ("""void f(const float* x, float* y, float* z, long n) {
    float acc = 0.0f, sq = 0.0f;
    for (long i = 0; i < n; i++) { acc += x[i]; sq += x[i] * x[i]; y[i] = acc; z[i] = sq; }
}""", "two scalars"),
    # not an associative accumulation: a decaying sum
    ("""void f(const float* x, float* y, long n) {
    float acc = 0.0f;
    for (long i = 0; i < n; i++) { acc = 0.9f * acc + x[i]; y[i] = acc; }
}""", "not a running sum"),
    # the scan reads its own output at another position: a dependence besides the scan
    ("""void f(float* y, long n) {
    float acc = 0.0f;
    for (long i = 1; i < n; i++) { acc += y[i - 1]; y[i] = acc; }
}""", "reaches an element"),
])
def test_not_offered_where_it_would_be_wrong(body, why):
    assert blocked_scan(body, "f") is None
    assert why in reason(body, "f")


def test_a_helper_called_with_the_same_buffer_twice_is_out_of_reach():
    src = """/* kernelcrew
entry: cumsum_rows
flags: [-O2]
*/
#include <cstdint>
static void scan(const float* x, float* y, long n) {
    float acc = 0.0f;
    for (long i = 0; i < n; i++) { acc += x[i]; y[i] = acc; }
}
extern "C" void cumsum_rows(const float* x, float* y, int64_t rows, int64_t cols) {
    scan(y, y, rows * cols);
}
"""
    assert apply_transform("blocked_scan", src) is None


def test_an_existing_pragma_on_the_scan_is_kept_on_the_serial_copy():
    src = """void f(const float* x, float* y, long n) {
    float acc = 0.0f;
#pragma GCC unroll 4
    for (long i = 0; i < n; i++) { acc += x[i]; y[i] = acc; }
}"""
    out = blocked_scan(src, "f")
    assert out is not None and out.count("#pragma GCC unroll 4") == 1
    threaded = """void f(const float* x, float* y, long n) {
    float acc = 0.0f;
#pragma omp parallel for
    for (long r = 0; r < 4; r++)
        for (long i = 0; i < n; i++) { acc += x[i]; y[i] = acc; }
}"""
    assert blocked_scan(threaded, "f") is None


# C89 rows: the row counter declared before its loop, its value used after it
ROWS89 = """
int scan89(const float* x, float* y, int64_t rows, int64_t cols) {
    int r;
    for (r = 0; r < (int)rows; r++) {
        float acc = 0.0f;
        for (int c = 0; c < (int)cols; c++) {
            acc += x[r * cols + c];
            y[r * cols + c] = acc;
        }
    }
    return r;
}
"""


@pytest.mark.parametrize("rows, cols", [(20, 3000), (2, 50000)])
def test_c89_row_counters_keep_their_last_value(rows, cols, tmp_path):
    out = blocked_scan(ROWS89, "scan89")
    assert out is not None
    assert "#pragma omp parallel for schedule(static) lastprivate(r)" in out
    # an inner counter shared by the rows (declared with r) would make the rows dependent
    shared = ROWS89.replace("int r;", "int r, c;").replace("for (int c", "for (c")
    assert "lastprivate" not in (blocked_scan(shared, "scan89") or "")
    call = "scan89(x, y, rows, cols)"
    serial = run(ROWS89, call, rows, cols, tmp_path)
    assert serial[2] == rows
    # float sums in another order: the checksum of 100000 prefix sums within 1e-3 (the op
    # allows 2e-2 per element)
    assert close(run(out, call, rows, cols, tmp_path, "-DOMP_MIN_WORK=1"), serial, 1e-3)


def test_after_row_threading_only_the_blocks_of_a_row_are_left(tmp_path):
    rows = apply_transform("omp_parallel", CUMSUM)
    out = apply_transform("blocked_scan", rows)
    assert out is not None
    # the serial copy of the row threading (few rows, or little work) gets the blocked scan
    # of each row, without a second dispatch on the rows
    assert "blocked scan: rows" not in out and out.count("omp parallel for") == 1
    assert "// kernelcrew: blocked scan" in out
    serial = run(CUMSUM, CALL, 3, 70001, tmp_path)
    assert close(run(out, CALL, 3, 70001, tmp_path), serial, 1e-4)
