"""OMP_MIN_WORK down a ladder: two rungs where each iteration computes a math function (the
default threshold keeps mid-size shapes of such a loop on one core), one rung for a loop of
loads and adds; none once a threaded attempt regressed a group, nor after the one rung of a
light loop was accepted."""

from __future__ import annotations

from kernelcrew.agents.context import IterationNote
from kernelcrew.agents.heuristic.loop import Loop
from kernelcrew.agents.transforms import apply_transform
from tests.agents.conftest import baseline_text
from tests.agents.test_private_bins import _library_ctx


def _threaded(op: str, *moves: str) -> str:
    text = baseline_text(op)
    for m in moves:
        text = apply_transform(m, text) or text
    assert "OMP_MIN_WORK" in text
    return text


def _rungs(ctx) -> list[int]:
    return [p.change.knobs["OMP_MIN_WORK"] for p in Loop().propose(ctx)
            if p.change.kind == "knob:OMP_MIN_WORK"]


def test_a_threaded_loop_of_inline_math_gets_a_lower_threshold():
    text = _threaded("gelu_tanh", "vector_math_ext", "omp_parallel")
    assert "kc_tanh1pf(" in text
    assert _rungs(_library_ctx("gelu_tanh", text)) == [262144, 65536]


def test_a_threaded_loop_of_loads_and_adds_gets_one_rung():
    text = _threaded("scale_shift_sum", "omp_parallel")
    ctx = _library_ctx("scale_shift_sum", text)
    assert _rungs(ctx) == [262144]
    ctx.recent = [IterationNote(iteration=2, author="loop", kind="knob:OMP_MIN_WORK",
                                outcome="accepted", detail="1.12x over the best")]
    assert _rungs(ctx) == []  # one step only for a light loop


def test_a_reference_blas_ddot_gets_one_rung():
    # int counters, the n % 5 clean-up loop first, both loops threaded by omp_parallel
    text = _threaded("ddot", "omp_parallel")
    assert _rungs(_library_ctx("ddot", text)) == [262144]


def test_not_after_threads_regressed_a_group():
    text = _threaded("gelu_tanh", "vector_math_ext", "omp_parallel")
    ctx = _library_ctx("gelu_tanh", text)
    ctx.recent = [IterationNote(iteration=1, author="loop", kind="omp_parallel", outcome="same",
                                detail="1.40x overall but the unaligned group regresses "
                                       "(0.70x, its own noise ±12%); not accepted")]
    assert _rungs(ctx) == []
