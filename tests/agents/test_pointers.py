"""Pointer walks (`*dst++ = f(*src++)`) turned into subscripts (`index_pointers`), and the
moves that see an array walk through it; walks whose position is not known at every
iteration are left alone."""

from __future__ import annotations

import subprocess

import pytest

from kernelcrew.agents.transforms import apply_transform
from kernelcrew.agents.transforms.views.pointer_walks import index_pointers
from kernelcrew.csource.syntax import Source

HEAD = "/* kernelcrew\nentry: f\nflags: [-O2]\n*/\n#include <cstddef>\n#include <cstdint>\n"

SCAN = """
void f(const float* x, float* y, int64_t rows, int64_t cols) {
    const float* src = x;
    float* dst = y;
    for (size_t r = 0; r < (size_t)rows; ++r) {
        float running = 0.0f;
        for (size_t c = 0; c < (size_t)cols; ++c) {
            running += *src++;
            *dst++ = running;
        }
    }
}
"""

# one flat walk, `int` counter, the pointers are the parameters themselves
SCALE = """
void f(const float* src, float* dst, int n) {
    for (int i = 0; i < n; i++) *dst++ = 2.0f * *src++;
}
"""


def run(src: str, call: str, tmp_path) -> str:
    prog = tmp_path / "p.cpp"
    prog.write_text("#include <cstddef>\n#include <cstdint>\n#include <cstdio>\n" + src + f"""
int main() {{
    static float a[37 * 29], out[37 * 29];
    for (int i = 0; i < 37 * 29; ++i) a[i] = (float)((i * 7) % 13) - 6.0f;
    {call};
    double h = 0;
    for (int i = 0; i < 37 * 29; ++i) h = h * 1.0001 + out[i];
    std::printf("%.6f", h);
    return 0;
}}
""")
    exe = tmp_path / "p"
    subprocess.run(["g++", "-O2", "-fopenmp", str(prog), "-o", str(exe)], check=True)
    return subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout


def test_a_row_scan_walked_with_pointers_gets_subscripts_and_threads_over_rows(tmp_path):
    got = index_pointers(SCAN, "f")
    assert got is not None and not Source(got).has_errors()
    assert "running += src[r * ((size_t)cols) + c];" in got
    assert "dst[r * ((size_t)cols) + c] = running;" in got
    assert index_pointers(got, "f") is None
    threaded = apply_transform("omp_parallel", HEAD + SCAN)
    assert threaded is not None and "#pragma omp parallel for schedule(static)" in threaded
    # the scan itself stays serial: no simd, no accumulators on the running sum
    assert apply_transform("simd", HEAD + SCAN) is None
    assert apply_transform("accumulators", HEAD + SCAN) is None
    call = "f(a, out, 37, 29)"
    want = run(SCAN, call, tmp_path)
    assert run(got, call, tmp_path) == want
    kernel = threaded[threaded.index("*/") + 2:]
    assert run("#define OMP_MIN_WORK 1\n" + kernel, call, tmp_path) == want  # threads


def test_a_flat_walk_of_the_parameters_is_vectorized_and_threaded(tmp_path):
    got = index_pointers(SCALE, "f")
    assert "dst[i] = 2.0f * src[i];" in got
    simd = apply_transform("simd", HEAD + SCALE)
    assert simd is not None and "#pragma omp simd" in simd
    call = "f(a, out, 37 * 29)"
    assert run(got, call, tmp_path) == run(SCALE, call, tmp_path)


# a walk unrolled by hand (two elements per iteration), then continued after the loop
PAIRS = """
void f(const float* src, float* dst, int n) {
    for (int i = 0; i < n / 2; i++) {
        *dst++ = src[2 * i];
        *dst++ = -src[2 * i + 1];
    }
    if (n % 2) *dst++ = 5.0f;
    *dst = 7.0f;
}
"""


@pytest.mark.parametrize("n", [0, 1, 2, 7, 37 * 29 - 1])
def test_walks_unrolled_by_hand_and_read_after_the_loop(tmp_path, n):
    got = index_pointers(PAIRS, "f")
    assert "dst[2 * (i) + 0] = src[2 * i];" in got and "dst[2 * (i) + 1] = -src[2 * i + 1];" in got
    assert "if (dst_walked > 0) dst += 2 * dst_walked;" in got
    call = f"f(a, out, {n})"
    assert run(got, call, tmp_path) == run(PAIRS, call, tmp_path)


@pytest.mark.parametrize("body, why", [
    ("for (int i = 0; i < n; i++) { if (src[i] > 0) *dst++ = src[i]; }",
     "moves only on some iterations (a stream compaction)"),
    ("for (int i = 0; i < n; i++) { *dst++ = src[i] + *dst++; }",
     "moves twice in one statement (unsequenced)"),
    ("if (n > 2) for (int i = 0; i < n; i++) *dst++ = src[i];\n    *dst = 0.0f;",
     "its final value is used after a loop that is not a statement of a block"),
    ("for (int i = 0; i < n; i++) for (int j = 0; j < i; j++) *dst++ = src[j];",
     "a triangular nest: rows of different lengths"),
    ("for (int i = 0; i < n; i++) { if (src[i] < 0) break; *dst++ = src[i]; }",
     "the loop may stop early"),
    ("for (int i = 0; i < n; i++) { *dst++ = src[i]; dst[0] = 1.0f; }",
     "the pointer is read elsewhere in the loop"),
    (("for (int i = 0; i < n; i++) { for (int j = 0; j < 4; j++) *dst++ = src[j]; "
      "for (int j = 0; j < 4; j++) *dst++ = -src[j]; }"), "two walks in one row"),
])
def test_walks_whose_position_is_not_known_stay_as_they_are(body, why):
    src = f"void f(const float* src, float* dst, int n) {{\n    {body}\n}}\n"
    assert not Source(src).has_errors(), src
    assert index_pointers(src, "f") is None, why
