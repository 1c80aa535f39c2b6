"""loop_order: a perfectly nested pair whose inner loop walks memory with a stride is
exchanged, in column-order code and in a convolution with the time loop outside the
channels (through its indexing macros); pairs whose order matters are not."""

from __future__ import annotations

import subprocess

import pytest

from kernelcrew.agents.transforms import apply_transform
from kernelcrew.agents.transforms.cpu.loop_nests import swap_loops

HEAD = "/* kernelcrew\nentry: f\nflags: [-O2]\n*/\n#include <cstdint>\n"

COLUMNS = """
void f(const float* u, float* v, int ny, int nx) {
    for (int j = 1; j < nx - 1; j++) {
        for (int i = 1; i < ny - 1; i++) {
            v[i * nx + j] = u[(i - 1) * nx + j] + u[(i + 1) * nx + j] + u[i * nx + j - 1];
        }
    }
}
"""

CONV = """
#define X(c, t) x[(c) * L + (t)]
#define OUT(c, t) out[(c) * L + (t)]
void f(const float* x, const float* w, float* out, int C, int L, int K) {
    for (int t = 0; t < L; t++) {
        for (int c = 0; c < C; c++) {
            float acc = 0.0f;
            for (int k = 0; k < K; k++) {
                int src = t - (K - 1) + k;
                if (src >= 0) acc += w[c * K + k] * X(c, src);
            }
            OUT(c, t) = acc;
        }
    }
}
"""


def run(src: str, call: str, tmp_path) -> str:
    prog = tmp_path / "p.cpp"
    prog.write_text("#include <cstdio>\n" + src + f"""
int main() {{
    static float a[40 * 50], w[40 * 4], out[40 * 50];
    for (int i = 0; i < 40 * 50; ++i) {{ a[i] = (float)((i * 7) % 13) - 6.0f; out[i] = 0; }}
    for (int i = 0; i < 40 * 4; ++i) w[i] = (float)(i % 5) - 2.0f;
    {call};
    double h = 0;
    for (int i = 0; i < 40 * 50; ++i) h = h * 1.0001 + out[i];
    std::printf("%.6f", h);
    return 0;
}}
""")
    exe = tmp_path / "p"
    subprocess.run(["g++", "-O2", str(prog), "-o", str(exe)], check=True)
    return subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout


def test_column_order_code_gets_the_row_loop_inside(tmp_path):
    got = swap_loops(COLUMNS, "f")
    assert got is not None
    assert got.index("for (int i = 1") < got.index("for (int j = 1")
    assert swap_loops(got, "f") is None  # the right order already
    call = "f(a, out, 40, 50)"
    assert run(got, call, tmp_path) == run(COLUMNS, call, tmp_path)


def test_a_convolution_through_its_macros_gets_the_time_loop_inside(tmp_path):
    new = apply_transform("loop_order", HEAD + CONV)
    assert new is not None
    body = new[new.index("*/") + 2:]
    assert body.index("for (int c = 0") < body.index("for (int t = 0")
    call = "f(a, w, out, 40, 50, 4)"
    assert run(body, call, tmp_path) == run(CONV, call, tmp_path)


@pytest.mark.parametrize("old, new", [
    ("v[i * nx + j] = u[(i - 1) * nx + j]", "v[i * nx + j] = v[(i - 1) * nx + j]"),
    ("for (int i = 1; i < ny - 1; i++)", "for (int i = 1; i < j; i++)"),
    ("v[i * nx + j] =", "v[i] +="),
])
def test_pairs_whose_order_matters_are_not_exchanged(old, new):
    """A recurrence down the columns (each row needs the one above), a triangular nest,
    several (i, j) writing one element: the order of the pair is part of the result."""
    src = COLUMNS.replace(old, new)
    assert src != COLUMNS
    assert swap_loops(src, "f") is None


def test_an_existing_pragma_keeps_the_order():
    src = COLUMNS.replace("    for (int j = 1", "#pragma omp parallel for\n    for (int j = 1")
    assert swap_loops(src, "f") is None
