"""The specialist's context: focused, folded, held to a token budget, and reported."""

from __future__ import annotations

import re

import pytest

from kernelcrew.agents.context import Feedback, IterationNote
from kernelcrew.agents.llm import build_context, focus
from tests.llm.conftest import settings_for
from tests.llm.scripted_server import answer
from tests.llm.scripts import PLAN, code, vadd_context


@pytest.fixture(autouse=True)
def _chars_over_four(monkeypatch):
    """Count tokens as chars/4 here, whether or not tiktoken's files are cached."""
    monkeypatch.setattr(focus, "_tokenizer", lambda: None)


def busy_context(**over):
    """Twelve iterations of history, 40 tried lines, 10 reflections, 10 kinds of stats."""
    recent = [IterationNote(iteration=i, author="loop", kind=f"kind{i}", outcome="slower",
                            speedup=0.9, detail="the gate said slower " * 3)
              for i in range(1, 13)]
    return vadd_context(
        recent=recent, tried=[f"old{i:02d} by loop: slower" for i in range(40)],
        reflections=[f"reflection {i}: " + "restrict helped on a similar add. " * 4
                     for i in range(10)],
        change_stats={f"kind{i}": {"tried": 3, "accepted": 1} for i in range(10)},
        iteration=13, **over)


def test_old_iterations_are_folded_into_the_tried_list():
    c = build_context(busy_context(), "loop", budget=100_000)
    # the last five iterations in full, the seven before folded to one line each
    for i in range(8, 13):
        assert f"iteration {i}: loop/kind{i}: slower, 0.90x vs baseline" in c.text
    for i in range(1, 8):
        assert f"iteration {i}: loop" not in c.text
        assert f"kind{i} by loop: slower 0.90x (iteration {i})" in c.text
    assert "old39 by loop: slower" in c.text and c.trimmed == []
    assert c.report()["over_budget"] is False and c.tokens <= c.budget


def test_the_budget_trims_lowest_priority_sections_first_and_reports_it():
    full = build_context(busy_context(), "loop", budget=100_000)
    # room for everything but about 500 tokens: the track record and the tried list go
    # first, then the least relevant reflections
    c = build_context(busy_context(), "loop", budget=full.tokens - 500)
    rep = c.report()
    assert rep["tokens"] <= rep["budget"] == full.tokens - 500
    assert rep["trimmed"][0] == "change_stats: 10 dropped"
    assert rep["trimmed"][1].startswith("tried: ")
    # a section trimmed in part says so; one trimmed whole is left out
    assert re.search(r"- \(\d+ more omitted for the context budget\)", c.text)
    assert "## Track record of kinds of change" not in c.text
    assert "iteration 8: loop/kind8" in c.text  # recent iterations are kept longer
    assert rep["counted_with"] == "chars/4"
    # a tight budget: the recent iterations fold down to three, the metrics go before
    # the profile summary; the operator, the kernel and the rules of the game stay
    tight = build_context(busy_context(), "loop", budget=300)
    assert tight.tokens <= 300
    assert "recent: 2 oldest folded into tried" in tight.trimmed
    for i in (10, 11, 12):
        assert f"iteration {i}: loop/kind{i}" in tight.text
    assert "iteration 9: loop/kind9" not in tight.text
    assert "extern \"C\" void vadd" in tight.text and "Tolerance: rtol=1e-05" in tight.text
    names = [t.split(":")[0] for t in tight.trimmed]
    assert names.index("metrics") < names.index("profile")


def test_a_budget_below_what_must_stay_is_reported_as_over_budget():
    fb = Feedback(kind="compile-error", message="line 8: error: expected ';'", attempt=2)
    c = build_context(busy_context(feedback=fb), "memory_access", budget=10)
    assert c.report()["over_budget"] is True and c.tokens > 10
    # never trimmed: the operator, the current best kernel, the feedback
    assert "extern \"C\" void vadd" in c.text and "expected ';'" in c.text
    assert "Compile errors of your last candidate (attempt 2 of 3)" in c.text


@pytest.mark.parametrize("kind, message, title", [
    ("incorrect",
     ("unaligned n=100003: y max abs err 0.5 (atol 1e-06), max rel err 0.25; "
      "failing indices [[99999], [100000], [100002]]"),
     ("Your last candidate was incorrect (failing group/case, output, index, what it "
      "wrote, what the reference says)")),
    ("slower",
     ("group      case      best_ms  cand_ms  speedup\n"
      "typical    n=200000  0.120    0.200    0.60x"),
     "Your last candidate was not faster than the best: the critic's comparison"),
])
def test_correctness_failures_and_regressions_reach_the_agent(serve, tmp_path, kind, message,
                                                                title):
    from kernelcrew.agents.llm import make_specialist

    srv = serve({("loop", "plan"): [answer(PLAN)], ("loop", "code"): [answer(code())]})
    a = make_specialist("loop", settings=settings_for(srv), run_dir=str(tmp_path))
    a.propose(vadd_context(feedback=Feedback(kind=kind, message=message)))
    for call in srv.exchanges:
        assert f"## {title}" in call.user and message in call.user


def test_the_context_report_is_kept_for_the_trace(serve, tmp_path):
    from kernelcrew.agents.llm import make_specialist

    srv = serve({("loop", "plan"): [answer(PLAN)], ("loop", "code"): [answer(code())]})
    a = make_specialist("loop", settings=settings_for(srv, context_budget=500),
                        run_dir=str(tmp_path))
    a.propose(busy_context())
    assert a.last_context["budget"] == 500 and a.last_context["tokens"] <= 500
    assert a.last_context["trimmed"]


def test_the_compiler_flags_specialist_sees_the_vectorization_report_of_the_best_kernel():
    from kernelcrew.tools.observe.profile import profile
    from tests.llm.test_llm_graph import OP

    prof = profile(OP, None, "cpu")  # the real g++ -fopt-info-vec report of the baseline
    assert prof.compile_report.startswith("g++ -fopt-info-vec report:")
    assert "line " in prof.compile_report
    ctx = vadd_context(profile=prof, compile_report=prof.compile_report)
    flags = build_context(ctx, "compiler_flags", budget=100_000).text
    assert "Compiler report:" in flags and prof.compile_report.splitlines()[1] in flags
    # the other specialists are not given it
    assert "Compiler report:" not in build_context(ctx, "loop", budget=100_000).text


def test_the_last_iterations_are_kept_whole_not_the_last_evaluations():
    # three candidates per iteration over eight iterations: the last five iterations are
    # shown with every candidate, the three before folded
    recent = [IterationNote(iteration=i, author=a, kind=f"{a}{i}", outcome="slower",
                            speedup=0.9, detail="slower (0.90x vs the best)")
              for i in range(1, 9) for a in ("loop", "memory_access", "compiler_flags")]
    c = build_context(vadd_context(recent=recent, iteration=9), "loop", budget=100_000)
    for i in range(4, 9):
        assert f"iteration {i}:\n  - loop/loop{i}: slower" in c.text
        assert f"  - compiler_flags/compiler_flags{i}: slower" in c.text
    for i in range(1, 4):
        assert f"iteration {i}:" not in c.text and f"loop{i} by loop: slower" in c.text


def test_the_contract_the_evidence_and_the_critique_reach_the_specialist():
    from kernelcrew.agents.contract import contract_of
    from kernelcrew.graph.agent_view import move_options, static_lines
    from kernelcrew.kernels.spec import load_op
    from tests.conftest import OPS

    spec = load_op(OPS / "vadd")
    ctx = vadd_context(contract=contract_of(spec), moves=move_options(
        vadd_context().kernel, "cpu"), static_evidence=[ln for _, ln in static_lines(
            vadd_context().kernel)], critiques=["loop's unroll lost: 0.91x vs the best."])
    text = build_context(ctx, "loop", budget=100_000).text
    assert "- x: float32[n] (input)" in text
    assert "- shape group unaligned (weight 0.5): n from 10^5 to 10^6" in text
    assert "100003" not in text and "200000" not in text
    assert "## What the source shows (static analysis)" in text
    assert "single-threaded (no omp parallel/for pragma)" in text
    assert "## The critic on the last race\n- loop's unroll lost: 0.91x vs the best." in text
    assert "- omp_parallel(min_work=1048576, knob='OMP_MIN_WORK'): #pragma omp parallel" in text
