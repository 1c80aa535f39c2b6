"""Counted `while` loops (`whiles`, a view): a pointer walked up to an end and a count down
to zero, written as `for` loops so the loop moves take them. On small sources in the styles
real C uses (a byte histogram in a helper over a `const void*` buffer, a scaled copy with
`while (n--)`), each rewritten kernel compiled and compared with the code as written; and
the loops whose trip count is not fixed before they start, or whose counter is read again,
left as they are."""

from __future__ import annotations

import ctypes

import numpy as np
import pytest

from kernelcrew.agents.transforms import apply_transform
from kernelcrew.agents.transforms.views.counted_whiles import counted_whiles
from tests.agents.test_reach import build, kernel, pragmas, ptr

# a byte histogram the way compression libraries write one: the buffer comes as
# `const void*`, a byte pointer walks it up to `end`, the counts are `unsigned`
BYTES = kernel("""
#include <string.h>
typedef unsigned char byte_t;

static void count_bytes(unsigned* count, const void* src, size_t size) {
    const byte_t* ip = (const byte_t*)src;
    const byte_t* const end = ip + size;
    memset(count, 0, 256 * sizeof(*count));
    while (ip < end) {
        count[*ip++]++;
    }
}

extern "C" void histogram(const uint8_t* values, uint32_t* counts, int64_t n) {
    count_bytes(counts, values, (size_t)n);
}
""", entry="histogram")


def _histogram(lib, values: np.ndarray) -> np.ndarray:
    counts = np.full(256, 7, np.uint32)
    lib.histogram(ptr(values), ptr(counts), ctypes.c_int64(values.size))
    return counts


@pytest.mark.parametrize("threads", [False, True])
def test_a_byte_histogram_walked_up_to_its_end_gets_private_bins(threads, tmp_path):
    out = apply_transform("private_bins", BYTES, {"extents": {"counts": "256"}, "copies": 4})
    assert out is not None and "private bins, 4 copies" in out
    assert "const long long ip_trip = (long long)(end - ip);" in out
    assert "count_copies[ip[ip_k]]++;" in out  # the walk is a subscript now
    if threads:
        out = out.replace("#define OMP_MIN_WORK 1048576", "#define OMP_MIN_WORK 1")
    lib = build(out, tmp_path)
    rng = np.random.default_rng(5)
    for n in (0, 3, 1000, 65537, 300001):  # below and above the copies' thresholds
        v = np.clip(rng.normal(128, 9, n), 0, 255).astype(np.uint8)
        assert np.array_equal(_histogram(lib, v), np.bincount(v, minlength=256)), n


COUNT_DOWN = kernel("""
static void scale_copy(float* dst, const float* src, size_t n, float a) {
    while (n--) *dst++ = *src++ * a;
}

extern "C" void f(const float* x, float* y, float a, int64_t n) {
    scale_copy(y, x, (size_t)n, a);
}
""")


def test_a_count_down_copy_is_threaded(tmp_path):
    out = apply_transform("omp_parallel", COUNT_DOWN)
    assert out is not None
    assert "for (size_t n_k = 0; n_k < n; ++n_k) dst[n_k] = src[n_k] * a;" in out
    assert any(p.startswith("omp parallel for") for p in pragmas(out))
    threaded = out.replace("#define OMP_MIN_WORK 1048576", "#define OMP_MIN_WORK 1")
    lib = build(threaded, tmp_path)
    rng = np.random.default_rng(6)
    for n in (0, 1, 17, 100003):
        x = rng.standard_normal(n).astype(np.float32)
        y = np.full(n + 1, np.nan, np.float32)  # one past the end stays untouched
        lib.f(ptr(x), ptr(y), ctypes.c_float(0.5), ctypes.c_int64(n))
        assert np.array_equal(y[:n], x * np.float32(0.5)) and np.isnan(y[n]), n


@pytest.mark.parametrize("body", [
    # the pointer moves by a data-dependent step
    "while (p < end) { c[*p]++; p += (*p > 3) ? 2 : 1; }",
    # a bump under a condition
    "while (p < end) { if (*p) p++; else { c[0]++; p++; } }",
    # the loop may stop early
    "while (p < end) { if (*p == 0) break; c[*p++]++; }",
    # the end moves too
    "while (p < end) { c[*p++]++; end--; }",
    # a count read in the body, and a count read after the loop
    "while (n--) c[p[n]]++;",
    "while (n--) c[*p++]++;\n    c[0] += (unsigned)n;",
])
def test_loops_whose_trip_is_not_fixed_stay_as_they_are(body):
    src = ("void h(const unsigned char* src, unsigned* c, long n) {\n"
           "    const unsigned char* p = src;\n    const unsigned char* end = src + n;\n"
           f"    {body}\n}}\n")
    assert counted_whiles(src, "h") is None, body


def test_a_count_an_outer_loop_reads_again_is_left_alone():
    # `k` runs down to -1 in the first row; the second row's loop would not run at all
    src = """void h(const float* x, float* y, long rows, long cols) {
    long k = cols;
    for (long r = 0; r < rows; r++) {
        while (k--) y[r] += x[r];
    }
}"""
    assert counted_whiles(src, "h") is None
    inside = src.replace("    long k = cols;\n", "").replace(
        "        while (k--)", "        long k = cols;\n        while (k--)")
    assert "for (long k_k = 0; k_k < k; ++k_k)" in counted_whiles(inside, "h")


def test_a_buffer_read_as_two_types_is_not_resolved():
    # a `void*` read as floats and as ints: its elements have no one type, so no subscript
    # of it is resolved and no move is offered
    src = kernel("""
extern "C" void f(const float* x, float* y, int64_t n) {
    const void* raw = x;
    const float* a = (const float*)raw;
    const int* b = (const int*)raw;
    for (int64_t i = 0; i < n; i++) y[i] = a[i] + (float)b[i];
}
""")
    assert apply_transform("omp_parallel", src) is None
    one = src.replace("const int* b = (const int*)raw;", "const float* b = (const float*)raw;")
    assert apply_transform("omp_parallel", one) is not None


# a DSP library's style: the count stepped down as a statement of the body, the pointers
# walked, four at a time and then the rest, the count set afresh between the two loops
BLOCKS = kernel("""
static void add_blocks(const float* a, const float* b, float* d, unsigned int len) {
    unsigned int blk;
    blk = len >> 2U;
    while (blk > 0U) {
        *d++ = (*a++) + (*b++);
        *d++ = (*a++) + (*b++);
        *d++ = (*a++) + (*b++);
        *d++ = (*a++) + (*b++);
        blk--;
    }
    blk = len % 0x4U;
    while (blk > 0U) {
        *d++ = (*a++) + (*b++);
        /* next */
        blk--;
    }
}

extern "C" void f(const float* a, const float* b, float* d, int64_t n) {
    add_blocks(a, b, d, (unsigned int)n);
}
""")


def _adds_blocks(lib, seed: int) -> None:
    """`f(a, b, d, n)` of BLOCKS adds a and b into d, whole blocks and the remainder, and
    writes nothing past n."""
    rng = np.random.default_rng(seed)
    for n in (0, 1, 3, 4, 7, 1001):
        a, b = (rng.standard_normal(n).astype(np.float32) for _ in range(2))
        d = np.full(n + 1, np.nan, np.float32)
        lib.f(ptr(a), ptr(b), ptr(d), ctypes.c_int64(n))
        assert np.array_equal(d[:n], a + b) and np.isnan(d[n]), n


def test_a_count_stepped_down_as_a_statement_is_counted(tmp_path):
    out = counted_whiles(BLOCKS, "add_blocks")
    assert out is not None and "while" not in out.split("add_blocks(")[1].split("extern")[0]
    assert "for (unsigned int blk_k = 0; blk_k < blk; ++blk_k)" in out
    lib = build(out, tmp_path)
    _adds_blocks(lib, seed=7)


@pytest.mark.parametrize("body", [
    # the count is read after the loop
    "while (k > 0) { c[0]++; k--; }\n    c[1] = (unsigned)k;",
    # stepped under a condition
    "while (k > 0) { if (c[0]) k--; c[1]++; }",
    # read in the body besides its step
    "while (k > 0) { c[k]++; k--; }",
    # `!= 0` on a signed count: a negative one never reaches zero by stepping down
    "while (k != 0) { c[0]++; k--; }",
])
def test_counts_stepped_down_that_stay_as_they_are(body):
    src = f"void h(unsigned* c, long n) {{\n    long k = n;\n    {body}\n}}\n"
    assert counted_whiles(src, "h") is None, body


def test_walks_unrolled_by_hand_and_continued_after_the_loop_become_subscripts(tmp_path):
    # four walks per iteration read elements 4*k + j; the remainder loop after it finds
    # each pointer moved on by what the first loop covered
    out = apply_transform("omp_parallel", BLOCKS)
    assert out is not None and "d[4 * (blk_k) + 3] = (a[4 * (blk_k) + 3])" in out
    assert "if (d_walked > 0) d += 4 * d_walked;" in out
    threaded = out.replace("#define OMP_MIN_WORK 1048576", "#define OMP_MIN_WORK 1")
    lib = build(threaded, tmp_path)
    _adds_blocks(lib, seed=8)
