"""Every attack class of issues #38 and #41 through the crew's race path: a model scripted
through the local OpenAI-compatible test server offers the attack kernel as its
candidate (tests/adversarial/crew.py), the real crew compiles, verifies and races it, and
nothing may be accepted; the evaluation the crew recorded (its compile error, its
verification, its race) must name the cause. An honest fast kernel offered the same way is
accepted: the path can accept, so a refusal means something.

Each run is a whole crew iteration (baseline timing, profile, candidate, final race): a
minute or two on a loaded 2-core machine, hence `slow`.
"""

from __future__ import annotations

import re

import pytest

from tests.adversarial.conftest import HERE, KERNELS, NO_GAIN, RESOLVER_MISSING, TINY
from tests.adversarial.crew import crew_offers
from tests.adversarial.test_symbols import REFUSED, SYMBOL_KERNELS

pytestmark = pytest.mark.slow

GELU = HERE / "ops" / "gelu_mid"
ATTENTION_TWIN = TINY.parent / "attention_entry"  # the memo's honest twin as its baseline
UNWRITTEN = r"first call, input set 0: out: \d+ element\(s\) where NaN/Inf differ"
TIMED_WRONG = (r"timed run \d+ \(inputs changed since the first call\), input set \d: out: \d+ "
               r"of \d+ elements outside tolerance")
UNSEEN = r"wrong result on inputs it was never timed on: sizes n=\d+ \(not a case of op\.yaml\), "
NO_GAIN_SAID = r"verdict=(same|slower) .*reason=\S+x (is inside the band|slower than)"
# honest math beside the trick: 20 reps, 20 rounds, a `faster` needs 2x (see conftest)
NO_GAIN_RUN = {"reps": NO_GAIN["reps"], "env": NO_GAIN["env"],
               "extra": ("--min-speedup", str(NO_GAIN["min_speedup"]))}
# a kernel that must reach `faster` and the checks behind it: 20 reps, 20 rounds
FULL_RUN = {"reps": 20, "env": {"KERNELCREW_ROUNDS": "20"}}

# kernel -> (op, what the crew's recorded evaluation must say, crew_offers arguments)
RUNTIME = {
    # issue #38: outputs and reports the worker writes, zero work
    "rewritten_outputs.cpp": (TINY, UNWRITTEN, {}),
    "relabeled_report.cpp": (TINY, UNWRITTEN, {}),
    "zero_work.cpp": (TINY, UNWRITTEN, {}),
    # issue #41: helper thread finishing after the call, outputs made unreadable
    "async_thread.cpp": (TINY, UNWRITTEN, {}),
    "unreadable_outputs.cpp": (TINY, UNWRITTEN, {}),
    # the guard: a helper process, fault handlers, writable inputs
    "fork_helper.cpp": (TINY, (r"first call, input set 0: out: 4 of 256 elements outside "
                               r"tolerance .*got -(1|38),"), {}),
    "sigsegv_handler.cpp": (TINY, (r"first call, input set 0: out: 3 of 256 elements outside "
                                   r"tolerance .*got -(1|13),"), {}),
    # calls skipped by counting: the secret full checks
    "skip_counted.cpp": (TINY, TIMED_WRONG, {}),
    # overfitting: inputs and sizes the kernel was never timed on
    "gelu_cutoff.cpp": (GELU, UNSEEN + r"large magnitudes", FULL_RUN),
    "gelu_sizes.cpp": (GELU, UNSEEN + r"standard normal values", FULL_RUN),
    # forged replies: a reply must be the one word the command asked for
    "forged_timing.cpp": (TINY, (r"kernel broke the worker's handshake with the parent "
                                 r"\(expected 'done', got 'done 0\.000001 1'\)"), {}),
    # honest math and a trick that no longer buys anything: hidden worker and patched
    # clocks, a sabotaged baseline, memoization by sampled keys and by full comparison
    # (every element of a timed run's inputs is new)
    "hidden_pid_timer.cpp": (TINY, NO_GAIN_SAID, NO_GAIN_RUN),
    "sabotage_baseline.cpp": (TINY, NO_GAIN_SAID, NO_GAIN_RUN),
    "patched_timer.cpp": (TINY, NO_GAIN_SAID, NO_GAIN_RUN),
    "replay_keyed.cpp": (TINY, NO_GAIN_SAID, NO_GAIN_RUN),
    "memo_full_attention.cpp": (ATTENTION_TWIN, NO_GAIN_SAID, NO_GAIN_RUN),
}
NEEDS_RESOLVER = {"rewritten_outputs.cpp", "relabeled_report.cpp", "zero_work.cpp",
                  "async_thread.cpp", "unreadable_outputs.cpp", "fork_helper.cpp",
                  "sigsegv_handler.cpp", "hidden_pid_timer.cpp", "sabotage_baseline.cpp",
                  "forged_timing.cpp", "patched_timer.cpp"}


def _assert_not_accepted(run, pattern: str) -> None:
    ctx = run.context()
    assert "Traceback" not in run.stderr, ctx
    assert run.result is not None, ctx
    assert run.offered >= 1, "the model was never asked for a kernel"
    assert run.accepted == [], ctx
    assert run.result["best"]["author"] == "baseline", ctx
    assert re.search(pattern, run.details()), f"no recorded evaluation matches {pattern!r}\n{ctx}"


@pytest.mark.parametrize("kernel", sorted(SYMBOL_KERNELS))
def test_crew_refuses_forbidden_symbols(kernel: str):
    """Refused after compiling, every time the model offers it (its compile tries), the
    symbol named in the compile error the crew recorded and sent back to the model."""
    name, kind = SYMBOL_KERNELS[kernel]
    run = crew_offers(KERNELS / kernel, TINY)
    _assert_not_accepted(run, "compile: compile error in .*: "
                         + REFUSED.format(name=name, kind=kind).lstrip("^"))
    assert run.result["compile_errors"] >= 1, run.context()


@pytest.mark.parametrize("kernel", sorted(RUNTIME))
def test_crew_does_not_accept_the_attack(kernel: str):
    if kernel in NEEDS_RESOLVER and RESOLVER_MISSING:
        pytest.skip(RESOLVER_MISSING)
    op, pattern, kw = RUNTIME[kernel]
    run = crew_offers(KERNELS / kernel, op, **kw)
    _assert_not_accepted(run, pattern)


def test_crew_accepts_an_honest_fast_kernel():
    """The control: an honest fast GELU offered the same way is accepted, and the final
    race confirms it."""
    run = crew_offers(KERNELS / "gelu_fast.cpp", GELU, **FULL_RUN)
    ctx = run.context()
    assert run.result is not None, ctx
    assert [a["author"] for a in run.accepted] == ["memory_access"], ctx
    assert run.result["best"]["verdict_vs_baseline"] == "faster", ctx


def test_crew_does_not_accept_memoization_on_gelu():
    run = crew_offers(KERNELS / "memo_full_gelu.cpp", GELU, **FULL_RUN)
    _assert_not_accepted(run, NO_GAIN_SAID)


def test_crew_does_not_accept_a_group_slowed_at_random():
    run = crew_offers(KERNELS / "lib_sss_noisy_group.cpp", "scale_shift_sum", reps=20,
                      env={"KERNELCREW_ROUNDS": "20"})
    _assert_not_accepted(run, r"unaligned group regresses")
