"""Code written for several targets (a path per target under `#if` inside the function,
C89 locals declared at the top): the moves take the path the kernel compiles, the result
keeps the other targets' paths as they were, and a local each loop sets first is private
to the loop. Each rewrite compiled and run against the code as written."""

from __future__ import annotations

import ctypes

import numpy as np
import pytest

from kernelcrew.agents.transforms import apply_transform
from kernelcrew.agents.transforms.views.active_branches import (
    MARK,
    Undecided,
    active_branches,
    decide,
    restore_branches,
)
from kernelcrew.agents.transforms.views.loop_counters import scope_scalars
from tests.agents.test_reach import build, kernel, pragmas, ptr

# a DSP library's shape: a vector path the kernel does not compile (its intrinsics and its
# locals unknown here), a portable path with the accumulator declared at the top
TARGETS = kernel("""
#define BLOCK 4
static void row_sums(const float *x, float *out, int rows, int cols)
{
    float acc;
    int r, c;
#if defined(USE_VECTOR_UNIT) && (BLOCK > 2)
    vec4_t v;
    for (r = 0; r < rows; r++) {
        v = vdup(0);
        for (c = 0; c < cols; c += 4) v = vadd(v, vload(x + r * cols + c));
        out[r] = vsum(v);
    }
#elif BLOCK == 4
    for (r = 0; r < rows; r++) {
        acc = 0.0f;
        for (c = 0; c < cols; c++) {
#ifdef SCALE_INPUT
            acc += 0.5f * x[r * cols + c];
#else
            acc += x[r * cols + c];
#endif
        }
        out[r] = acc;
    }
#else
    for (r = 0; r < rows * cols; r++) out[0] += x[r];
#endif
}

extern "C" void f(const float* x, float* out, int64_t rows, int64_t cols) {
    row_sums(x, out, (int)rows, (int)cols);
}
""")


def test_the_path_the_kernel_compiles_is_the_one_the_moves_see():
    view = active_branches(TARGETS, "row_sums")
    assert view is not None
    fn = view.split("static void row_sums")[1].split("extern")[0]
    assert "vadd" not in fn and "out[0] +=" not in fn and "#if" not in fn
    assert "acc += x[r * cols + c];" in fn and "0.5f" not in fn
    assert len(view.split("\n")) == len(TARGETS.split("\n"))  # line for line
    # the markers name the rows they stand for, and go back exactly
    assert restore_branches(TARGETS, "row_sums", view) == TARGETS


@pytest.mark.parametrize("rows, cols", [(3, 5), (64, 33), (1, 1)])
def test_a_move_on_that_path_keeps_every_other_target_as_written(tmp_path, rows, cols):
    out = apply_transform("omp_parallel", TARGETS)
    assert out is not None and MARK not in out
    assert any(p.startswith("omp parallel for") for p in pragmas(out))
    for text in ("#if defined(USE_VECTOR_UNIT) && (BLOCK > 2)", "v = vadd(v, vload(",
                 "for (r = 0; r < rows * cols; r++) out[0] += x[r];", "#elif BLOCK == 4"):
        assert out.count(text) == TARGETS.count(text), text
    # the group inside the row loop goes with each copy of the loop (threaded, serial)
    for text in ("#ifdef SCALE_INPUT", "acc += 0.5f * x[r * cols + c];"):
        assert out.count(text) == 2 * TARGETS.count(text), text
    threaded = out.replace("#define OMP_MIN_WORK 1048576", "#define OMP_MIN_WORK 1")
    results = []
    for name, text in (("before", TARGETS), ("after", threaded)):
        (tmp_path / name).mkdir()
        lib = build(text, tmp_path / name)
        x = np.arange(rows * cols, dtype=np.float32) % 7 - 3
        y = np.full(rows, np.nan, np.float32)
        lib.f(ptr(x), ptr(y), ctypes.c_int64(rows), ctypes.c_int64(cols))
        results.append(y)
    assert np.array_equal(*results)


def test_conditions_the_text_does_not_decide_are_left_alone():
    macros = {"BLOCK": "4", "FN": None, "EMPTY": ""}
    assert decide("defined(BLOCK) && BLOCK * 2 == 8 && !defined(OTHER)", macros)
    assert decide("!BLOCK == 0", macros)  # C's precedence: (!4) == 0
    for cond in ("defined(__AVX2__)", "_OPENMP >= 201511", "EMPTY", "FN(2)", "BLOCK / 0"):
        with pytest.raises(Undecided):
            decide(cond, macros)
    src = TARGETS.replace("#elif BLOCK == 4", "#elif defined(__AVX2__)")
    view = active_branches(src, "row_sums")
    # the group with an undecidable branch stays whole; the inner #ifdef is decided
    fn = view.split("static void row_sums")[1]
    assert "#if defined(USE_VECTOR_UNIT)" in fn and "#elif defined(__AVX2__)" in fn
    assert "#ifdef SCALE_INPUT" not in fn


def test_a_result_that_lost_or_split_a_set_aside_group_is_refused():
    view = active_branches(TARGETS, "row_sums")
    lines = view.split("\n")
    marked = [k for k, ln in enumerate(lines) if MARK in ln]
    # a lost line (a move rewrote the span that held it)
    lost = "\n".join(ln for k, ln in enumerate(lines) if k != marked[3])
    assert restore_branches(TARGETS, "row_sums", lost) is None
    # a copy of part of a group: an #if left open
    opening = next(k for k in marked if TARGETS.split("\n")[k].startswith("#ifdef"))
    assert restore_branches(TARGETS, "row_sums",
                            "\n".join(lines + [lines[opening]])) is None


ROWS = """
void f(const float *x, float *out, int rows, int cols) {
    float acc, last;
    int r, c;
    for (r = 0; r < rows; r++) {
        acc = 0.0f;
        for (c = 0; c < cols; c++) acc += x[r * cols + c];
        out[r] = acc;
    }
    BODY
}
"""


def test_a_local_each_loop_sets_first_is_declared_there():
    out = scope_scalars(ROWS.replace("BODY", ""), "f")
    assert out is not None and "float acc = 0.0f;" in out
    # and a second loop that sets it first gets its own
    two = ROWS.replace("BODY", "for (r = 0; r < rows; r++) { acc = x[r]; out[r] -= acc; }")
    assert scope_scalars(two, "f").count("float acc = ") == 2


@pytest.mark.parametrize("body", [
    "last = acc;",                                   # read after the loop
    "for (r = 0; r < rows; r++) { out[r] = acc; acc = 1.0f; }",  # read before it is set
    "float *p = &acc; *p = 0.0f;",                   # its address is taken
])
def test_a_local_whose_value_crosses_iterations_stays_where_it_is(body):
    assert "float acc = " not in (scope_scalars(ROWS.replace("BODY", body), "f") or "")


def test_a_knob_the_compile_line_may_set_decides_nothing():
    # `#ifndef TILE` / `#define TILE 64`: the build passes -DTILE=... to try other values
    src = ("#ifndef TILE\n#define TILE 64\n#endif\n#define WIDE 1\n"
           "void f(float *x, int n) {\n#if TILE > 32\n    x[0] = 2.0f;\n#else\n"
           "    x[0] = 3.0f;\n#endif\n#if WIDE\n    x[1] = 1.0f;\n#endif\n}\n")
    view = active_branches(src, "f")
    assert "#if TILE > 32" in view and "x[0] = 3.0f;" in view  # left as it is
    assert "#if WIDE" not in view and "x[1] = 1.0f;" in view
