"""Loops that call hand-vectorized helpers (x86 intrinsics): a helper whose intrinsics only
compute, load, and store into its own local array is pure, and a pointer handed to such a
helper is safe to thread over when the loop writes nothing it points into (plain C helpers
are inlined by the views and checked element by element instead). The threshold
counts the helper's loop. A helper that stores through its pointer, or reads what the loop
writes, keeps its loop serial."""

from __future__ import annotations

import os
import subprocess

from kernelcrew.agents.transforms import apply_transform
from kernelcrew.agents.transforms.cpu.omp_parallel import why_not
from kernelcrew.kernels.kernelfile import parse_kernel_text

HEAD = "/* kernelcrew\nentry: f\nflags: [-O2]\n*/\n#include <cstdint>\n#include <immintrin.h>\n"

DOT = """
static inline float dot(int n, const float *x, const float *y) {
    int i, n4 = n >> 2 << 2;
    float t[4], s = 0.0f;
    __m128 acc = _mm_setzero_ps();
    for (i = 0; i < n4; i += 4)
        acc = _mm_add_ps(acc, _mm_mul_ps(_mm_loadu_ps(&x[i]), _mm_loadu_ps(&y[i])));
    for (; i < n; ++i) s += x[i] * y[i];
    _mm_storeu_ps(t, acc);
    return s + t[0] + t[1] + t[2] + t[3];
}
"""

ROWS = DOT + """
void f(const float *a, const float *v, float *out, int64_t rows, int64_t cols) {
    for (int r = 0; r < (int)rows; r++)
        out[r] = dot((int)cols, a + r * cols, v);
}
"""

# reads the output it writes: out[r] depends on out[r + 1 ...], the order matters
READS_OUTPUT = DOT + """
void f(const float *a, const float *v, float *out, int64_t rows, int64_t cols) {
    for (int r = 0; r < (int)rows - 1; r++)
        out[r] = dot((int)cols, out + r + 1, v) + a[r];
}
"""

# the helper stores a vector through its pointer: it writes, so it is not pure
AXPY = """
static inline void axpy4(float a, const float *x, float *y) {
    _mm_storeu_ps(y, _mm_add_ps(_mm_loadu_ps(y), _mm_mul_ps(_mm_set1_ps(a), _mm_loadu_ps(x))));
}

void f(const float *a, const float *v, float *out, int64_t rows, int64_t cols) {
    for (int r = 0; r < (int)rows; r++)
        axpy4(a[r], v, out + (r % 2) * 4);
}
"""

# loads in the loop body itself: the analysis does not model what they touch
INLINE_LOADS = """
void f(const float *a, const float *v, float *out, int64_t rows, int64_t cols) {
    for (int r = 0; r < (int)rows; r++)
        _mm_storeu_ps(out + 4 * r, _mm_mul_ps(_mm_loadu_ps(a + 4 * r), _mm_loadu_ps(v)));
}
"""


def run(src: str, main: str, tmp_path, name: str) -> str:
    """`src` with `main`'s body, built with OpenMP and run on 4 threads; its output."""
    prog = tmp_path / f"{name}.cpp"
    prog.write_text(src + "\n#include <cstdio>\nint main() {\n" + main + "\n    return 0;\n}\n")
    exe = tmp_path / name
    # OMP_MIN_WORK=1: the threaded copy runs on these small sizes
    subprocess.run(["g++", "-O2", "-fopenmp", "-DOMP_MIN_WORK=1", str(prog), "-o", str(exe)],
                   check=True)
    env = {**os.environ, "OMP_NUM_THREADS": "4"}
    return subprocess.run([str(exe)], capture_output=True, text=True, check=True,
                          env=env).stdout


ROWS_MAIN = """
    static float a[97 * 131], v[131], out[97];
    for (int i = 0; i < 97 * 131; ++i) a[i] = (float)((i * 7) % 13) - 6.0f;
    for (int i = 0; i < 131; ++i) v[i] = (float)((i * 5) % 11) * 0.25f;
    for (int i = 0; i < 97; ++i) out[i] = 1.0f;
    f(a, v, out, 97, 131);
    for (int i = 0; i < 97; ++i) std::printf("%.5f ", (double)out[i]);"""


def test_rows_through_a_pure_simd_helper_are_threaded_and_give_the_same_result(tmp_path):
    new = apply_transform("omp_parallel", HEAD + ROWS)
    assert new is not None
    body = new[new.index("void f"):]
    assert "#pragma omp parallel for" in body
    assert "if ((long long)((int)rows) * ((int)cols) >= OMP_MIN_WORK)" in body  # dot's loop
    kernel = new[new.index("*/") + 2:]
    plain = HEAD[HEAD.index("*/") + 2:] + ROWS
    assert run(kernel, ROWS_MAIN, tmp_path, "threaded") == \
        run(plain, ROWS_MAIN, tmp_path, "serial")


def test_helpers_that_write_or_read_what_the_loop_writes_keep_their_loops_serial():
    for src, why in ((READS_OUTPUT, "passes a pointer to dot()"),
                     (AXPY, "which stores a vector through y"),
                     (INLINE_LOADS, "calls _mm_storeu_ps()")):
        assert apply_transform("omp_parallel", HEAD + src) is None, why
        assert why in why_not(parse_kernel_text(HEAD + src, "cpu")), why


# a tiled C += A B^T in the style of small autodiff libraries: tile counters declared at
# the top of the tile's block, and B's row pointer stepped beside the column counter
TILED = DOT + """
void f(const float *a, const float *b, float *c, int64_t m, int64_t n, int64_t k) {
    static const int T = 16;
    int i, j;
    for (i = 0; i < (int)m; i += T)
        for (j = 0; j < (int)n; j += T) {
            int ii, ie = (int)m < i + T ? (int)m : i + T;
            int jj, je = (int)n < j + T ? (int)n : j + T;
            for (ii = i; ii < ie; ++ii) {
                const float *ai = a + ii * k, *bj;
                float *ci = c + ii * n;
                for (jj = j, bj = b + j * k; jj < je; ++jj, bj += k)
                    ci[jj] += dot((int)k, ai, bj);
            }
        }
}
"""


TILED_MAIN = """
    const int m = 37, n = 45, k = 29;
    static float a[m * k], b[n * k], c[m * n];
    for (int i = 0; i < m * k; ++i) a[i] = (float)((i * 7) % 13) - 6.0f;
    for (int i = 0; i < n * k; ++i) b[i] = (float)((i * 5) % 11) * 0.25f;
    for (int i = 0; i < m * n; ++i) c[i] = (float)(i % 3);
    f(a, b, c, m, n, k);
    for (int i = 0; i < m * n; ++i) std::printf("%.4f ", (double)c[i]);"""


def test_a_tiled_nest_with_a_pointer_stepped_beside_its_counter_is_threaded(tmp_path):
    new = apply_transform("omp_parallel", HEAD + TILED)
    assert new is not None
    body = new[new.index("void f"):]
    assert "#pragma omp parallel for" in body
    # the pointer computed from the counter, the counters declared in their loops
    assert "const float *bj = (b + j * k) + (jj - (j)) * (k);" in body
    assert "for (int jj = j; jj < je; ++jj)" in body and "for (int ii = i;" in body
    kernel = new[new.index("*/") + 2:]
    plain = HEAD[HEAD.index("*/") + 2:] + TILED
    assert run(kernel, TILED_MAIN, tmp_path, "threaded") == \
        run(plain, TILED_MAIN, tmp_path, "serial")


def test_a_stepped_pointer_read_after_its_loop_is_left_as_written():
    from kernelcrew.agents.transforms.views.pointer_walks import split_comma_walks

    after = TILED.replace("ci[jj] += dot((int)k, ai, bj);",
                          "ci[jj] += dot((int)k, ai, bj);\n                ci[0] += bj[0];")
    assert split_comma_walks(TILED, "f") is not None
    assert split_comma_walks(after, "f") is None
    # nor one the body moves itself
    moved = TILED.replace("ci[jj] += dot((int)k, ai, bj);",
                          "{ ci[jj] += dot((int)k, ai, bj); bj += 1; }")
    assert split_comma_walks(moved, "f") is None
