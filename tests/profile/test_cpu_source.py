"""The static half of the CPU profile: loops, strides and g++'s vectorization report,
read from real kernel files and fixed texts (no compiler, no worker)."""

from __future__ import annotations

from kernelcrew.kernels.kernelfile import load_kernel
from kernelcrew.kernels.spec import load_op
from kernelcrew.tools.observe.cpu_source import (
    analyze,
    apply_vec_report,
    loop_at,
    parse_vec_report,
    size_values,
)

TILED = """/* kernelcrew
entry: transpose
flags: [-O3, -march=native, -fopenmp]
knobs: {TILE: 32}
*/
#include <cstdint>
extern "C" void transpose(const float* __restrict__ x, float* __restrict__ y,
                          int64_t rows, int64_t cols) {
#pragma omp parallel for schedule(static)
    for (int64_t i0 = 0; i0 < rows; i0 += TILE) {
        const int64_t i1 = i0 + TILE < rows ? i0 + TILE : rows;
        for (int64_t j0 = 0; j0 < cols; j0 += TILE) {
            const int64_t j1 = j0 + TILE < cols ? j0 + TILE : cols;
            for (int64_t j = j0; j < j1; ++j) {
                float* __restrict__ yj = y + j * rows;
#pragma omp simd
                for (int64_t i = i0; i < i1; ++i) {
                    yj[i] = x[i * cols + j];
                }
            }
        }
    }
}
"""

def loops_of(op: str, path=None, case: int = 0):
    spec = load_op(op)
    kf = load_kernel(path or spec.baseline_path("cpu"))
    sizes = list(spec.cases())[case].sizes
    return analyze(kf.text, entry=kf.meta.entry, values=size_values(kf, spec, sizes)), sizes


def test_transpose_writes_y_with_stride_rows_in_its_inner_loop() -> None:
    loops, sizes = loops_of("transpose")
    inner = [lp for lp in loops if lp.innermost]
    assert len(inner) == 1 and inner[0].var == "j" and inner[0].trip == "cols"
    acc = {(a.array, a.write): a for a in inner[0].accesses}
    assert acc[("y", True)].stride == "rows" and acc[("y", True)].kind == "large"
    assert acc[("y", True)].stride_elems == sizes["rows"]
    assert acc[("x", False)].stride == "1" and acc[("x", False)].kind == "unit"


def test_local_pointers_are_followed_to_their_arrays() -> None:
    loops, _ = loops_of("small_matmul")
    inner = next(lp for lp in loops if lp.innermost)
    acc = {a.array: a for a in inner.accesses}
    assert acc["b"].via == "bp" and acc["b"].stride == "n"  # bp[q * n + j], q innermost
    assert acc["a"].via == "ap" and acc["a"].stride == "1"


def test_tiled_loops_have_a_bounded_trip_count() -> None:
    loops = analyze(TILED, values={"rows": 2048, "cols": 2048, "TILE": 32})
    inner = next(lp for lp in loops if lp.innermost)
    assert inner.var == "i" and inner.trip == "<=TILE" and inner.trip_value == 32
    outer = loops[0]
    assert outer.trip == "rows/TILE"
    assert {a.array: a.kind for a in inner.accesses} == {"y": "unit", "x": "large"}


def test_non_linear_subscripts_are_unknown() -> None:
    src = """/* kernelcrew
entry: f
*/
#include <cstdint>
extern "C" void f(const float* x, const int* idx, float* y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) {
        y[i] = x[idx[i]] + x[i * i] + x[i / 2];
    }
}
"""
    (loop,) = analyze(src)
    kinds = {a.text: a.kind for a in loop.accesses}
    assert kinds["y[i]"] == "unit" and kinds["idx[i]"] == "unit"
    assert kinds["x[idx[i]]"] == "unknown" and kinds["x[i * i]"] == "unknown"
    assert kinds["x[i / 2]"] == "unknown"


# what g++ 12 (-fopt-info-vec-optimized-missed) says about TILED: the loops' messages sit
# on the `for` line, the `omp simd` pragma or a statement of the body
REPORT = """\
kernel.cpp:11:31: missed: couldn't vectorize loop
kernel.cpp:11:31: missed: not vectorized: multiple nested loops.
kernel.cpp:15:36: missed: couldn't vectorize loop
kernel.cpp:19:43: missed: not vectorized: not suitable for strided load _48 = *_45;
kernel.cpp:19:33: optimized: loop vectorized using 64 byte vectors
kernel.cpp:19:33: optimized: loop vectorized using 32 byte vectors
kernel.cpp:9:9: missed: not vectorized: vectorization is not profitable.
/usr/include/c++/12/cmath:464:27: missed: statement clobbers memory: _47 = __builtin_sqrtf (_12);
"""


def test_vectorization_report_is_mapped_to_the_loops() -> None:
    rep = parse_vec_report(REPORT, "kernel.cpp")
    assert rep[19].vectorized and rep[19].vector_bytes == 64
    assert not rep[15].vectorized and rep[15].reason == "strided access"
    assert 9 not in rep  # straight-line (SLP) code, not a loop
    loops = analyze(TILED, values={"rows": 64, "cols": 64, "TILE": 32})
    apply_vec_report(loops, rep)
    by_line = {lp.line: lp for lp in loops}
    assert sorted(by_line) == [10, 12, 14, 17]
    assert by_line[17].vectorized and by_line[17].vector_bytes == 64  # body line 19 -> loop 17
    assert by_line[14].vectorized is False and by_line[14].missed == "strided access"
    assert loop_at(loops, 16) is by_line[17]  # the omp simd pragma belongs to its loop


def test_perf_stat_csv_is_parsed_with_unsupported_events_as_none() -> None:
    from kernelcrew.tools.observe.perf import parse_perf_stat

    text = ("123456789,,cycles,1000,100.00,,\n"
            "<not supported>,,instructions,0,100.00,,\n"
            "2500,,LLC-loads:u,1000,100.00,,\n"
            "<not counted>,,LLC-load-misses,0,0.00,,\n")
    got = parse_perf_stat(text)
    assert got == {"cycles": 123456789.0, "instructions": None, "LLC-loads": 2500.0,
                   "LLC-load-misses": None}
