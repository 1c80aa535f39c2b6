"""The profiler and the moves read subscripts with one linearizer
(`kernelcrew.csource.affine.FunctionModel`), so they cannot disagree about a stride."""

from __future__ import annotations

import pytest

from kernelcrew.csource.affine import FunctionModel, p_derivative, p_plain
from kernelcrew.csource.syntax import Source, functions, walk
from kernelcrew.kernels.kernelfile import load_kernel
from kernelcrew.kernels.spec import library_ops, load_op
from kernelcrew.tools.observe.cpu_source import analyze, size_values


def _moves_strides(text: str) -> dict[tuple[int, str], dict]:
    """(line, access text) -> the stride the moves' model gives it in its innermost loop,
    where it is a polynomial over the function's parameters only."""
    s = Source(text)
    out = {}
    for fn in functions(s):
        m = FunctionModel(s, fn)
        params = {n.text.decode() for n in walk(fn.child_by_field_name("declarator"))
                  if n.type == "identifier"}
        for lp in m.loops:
            if lp.children:
                continue
            for n in walk(lp.body):
                if n.type not in ("subscript_expression", "pointer_expression"):
                    continue
                got = m.access(n, lp.node)
                if got is None or got[1] is None:
                    continue
                d = p_derivative(got[1], lp.key)
                if d is not None and all(s_ in params for mono in d for s_ in mono):
                    out[(n.start_point.row + 1, s.text_of(n)[:60])] = p_plain(d)
    return out


@pytest.mark.parametrize("op", sorted(library_ops()))
def test_the_profile_and_the_moves_agree_on_every_library_stride(op: str) -> None:
    spec = load_op(op)
    path = spec.baseline_path("cpu")
    if not path.exists():
        pytest.skip("no CPU baseline")
    kf = load_kernel(path)
    case = next(iter(spec.cases()))
    values = size_values(kf, spec, case.sizes)
    moves = _moves_strides(kf.text)
    seen = 0
    for lp in analyze(kf.text, entry=kf.meta.entry, values=values):
        for a in lp.accesses:
            d = moves.get((a.line, a.text))
            if d is None:
                continue
            seen += 1
            total = sum(c * _value(mono, values) for mono, c in d.items())
            assert a.stride_elems == total, (op, a.text, a.stride, d)
    assert seen or not moves


def _value(mono: tuple[str, ...], values: dict[str, int]) -> int:
    out = 1
    for s in mono:
        out *= values[s]
    return out


SRC = """/* kernelcrew
entry: f
*/
#include <cstdint>
extern "C" void f(const float* x, float* y, int64_t rows, int64_t cols) {
    const float* row = x;
    int64_t i = 0;
    for (int64_t r = 0; r < rows; ++r) {
        for (; i < cols; ++i) y[i] += row[i];   /* a loop with no initializer */
        row += cols;                            /* a row pointer stepped per row */
        for (int64_t j = 0; j < cols; ++j) y[j * rows + r] = row[j];
        i = 0;
    }
}
"""


def test_the_profile_reads_row_pointers_and_loops_without_an_initializer() -> None:
    loops = analyze(SRC, values={"rows": 8, "cols": 100})
    first, second = (lp for lp in loops if lp.innermost)
    assert first.var == "i" and {a.text: a.stride for a in first.accesses} == {
        "y[i]": "1", "row[i]": "1"}
    strides = {a.text: (a.stride, a.stride_elems) for a in second.accesses}
    assert strides == {"y[j * rows + r]": ("rows", 8), "row[j]": ("1", 1)}
