"""Why a run stops: a run with nothing left to try lists every move of the catalogue and
why each was not made; a run whose best is near the roofline stops there."""

from __future__ import annotations

import time

from kernelcrew.graph.context import RunContext
from kernelcrew.graph.nodes.reflect import considered, stop_reason

SCAN = """/* kernelcrew
entry: f
flags: [-O3]
*/
#include <stdint.h>
static void prefix(float* y, float* x, int n) {
    y[0] = x[0];
    for (int i = 1; i < n; i++) y[i] = y[i - 1] + x[i];
}
extern "C" void f(const float* x, float* y, int64_t n) { prefix(y, (float*)x, (int)n); }
"""


def state_for(tmp_path, **kw) -> dict:
    best = tmp_path / "best.cpp"
    best.write_text(SCAN)
    return {"iteration": 3, "evaluations": [
        {"iteration": 1, "kind": "flags:O3+restrict", "outcome": "accepted"}],
        "candidates": [], "started": time.time(), "since_improvement": 0,
        "best": {"path": str(best), "author": "loop"}, **kw}


def test_nothing_left_lists_every_move_and_why_it_was_not_made(tmp_path):
    reason = stop_reason(state_for(tmp_path), RunContext())
    assert reason.startswith("nothing left to try") and "moves considered:" in reason
    assert "flags (tried: accepted)" in reason and "restrict (tried: accepted)" in reason
    # the scan is refused by the dependence analysis, with the element it collides on
    assert "omp_parallel (not applicable: prefix(): " in reason
    assert "simd (not applicable: prefix(): " in reason
    assert "vector_math (not applicable: no float exp/erf call" in reason
    assert "unroll_and_jam (not applicable" in reason and "accumulators (not applicable" in reason
    assert "unroll (applies; no specialist's evidence called for it)" in reason


def test_a_best_above_the_roofline_threshold_stops_the_run(tmp_path):
    st = state_for(tmp_path, candidates=[{"path": "x"}])
    st["profile"] = {"kernel": st["best"]["path"], "roofline": {"bandwidth_share": 0.86,
                                                                "compute_share": 0.01}}
    assert stop_reason(st, RunContext(roofline_done=0.8)).startswith("roofline: the best kernel runs at 86%")
    st["profile"]["roofline"]["bandwidth_share"] = 4.5  # in cache, timed against DRAM peak
    assert stop_reason(st, RunContext()) == ""
    st["profile"]["roofline"]["bandwidth_share"] = 0.86
    assert stop_reason(st, RunContext(roofline_done=1.5)) == ""
    st["profile"]["kernel"] = "/elsewhere/older-best.cpp"  # the profile of an older best
    assert stop_reason(st, RunContext()) == ""
    assert "moves considered" in considered(st)


def test_roofline_done_from_the_command_line(tmp_path):
    from kernelcrew.cli import _context_from_args, build_parser

    st = state_for(tmp_path, candidates=[{"path": "x"}])
    st["profile"] = {"kernel": st["best"]["path"], "roofline": {"bandwidth_share": 0.99}}
    parse = build_parser().parse_args
    default = _context_from_args(parse(["optimize", "vadd"]))
    assert default.roofline_done == 0.95
    assert stop_reason(st, default).startswith("roofline: the best kernel runs at 99%")
    for value in ("2", "200%"):  # above 1: a run never stops there
        ctx = _context_from_args(parse(["optimize", "vadd", "--roofline-done", value]))
        assert ctx.roofline_done == 2.0 and stop_reason(st, ctx) == ""
