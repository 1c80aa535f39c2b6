"""Timing tricks: outputs of timed runs are checked again, replays keyed by buffer meet
a probe, reported times the parent's clock contradicts are rejected, and a time the
machine cannot reach is quarantined."""

from __future__ import annotations

import pytest

from kernelcrew.kernels.spec import load_op
from kernelcrew.tools.judge.check import roofline_floor_ms
from tests.adversarial.conftest import EVASIVE_ARCH, TINY, assert_rejected, judge

KERNELS_USED = {"timed_garbage.cpp", "replay_other_set.cpp", "replay_keyed.cpp",
                "forged_timing.cpp", "patched_timer.cpp", "lingering_thread.cpp"}


def test_timed_outputs_are_verified_again():
    """Correct on the first call per buffer, garbage on the timed calls: rejected."""
    j = judge("timed_garbage.cpp")
    assert_rejected(j, r"timed run.*input set \d: .*outside tolerance")


def test_timed_output_matching_only_another_sets_verified_output_is_rejected():
    """Correct when verified; when timed (inputs unchanged), another input set's
    verified answer: byte for byte an output that passed, but not for these inputs.
    A timed output skips the full comparison only when its bytes match an output that
    passed on the same input set, so this one is compared with its reference and fails."""
    j = judge("replay_other_set.cpp")
    assert_rejected(j, r"timed run, input set \d: .*outside tolerance")


def test_replay_keyed_by_buffer_meets_the_probe():
    """One cached answer per input buffer (and sampled values): the timed run whose
    inputs were changed in place gets the stale answer and is rejected."""
    j = judge("replay_keyed.cpp")
    assert_rejected(j, r"timed run with a few input elements changed in place "
                       r"\(a replayed or cached result\?\)")


@pytest.mark.skipif(not EVASIVE_ARCH, reason="uses x86-64/aarch64 syscall numbers")
def test_forged_report_is_rejected():
    """A kernel that rewrites the worker's report at exit (1e-6 ms per call, three of
    them) is correct, but its report does not hold the runs the parent asked for."""
    j = judge("forged_timing.cpp")
    assert_rejected(j, r"timings disagree with the parent's clock in case typical\[0\]: the "
                       r"worker reported 3 timed runs, the parent ran 4")


def test_patched_timer_is_rejected():
    """A kernel that slows the worker's timer to a third (honest math, reported times
    3x too short, well above the roofline floor) is rejected: the parent timed every
    batch and read the worker's CPU time around it: in the median round, the worker's main
    thread used more CPU time beyond its reported runs than the baseline's worker did, in
    the duel and in the second one that confirms a disagreement."""
    j = judge("patched_timer.cpp")
    assert_rejected(j, r"timings disagree with the parent's clock( in case \w+\[\d\])?: .*the "
                       r"worker's main thread used more CPU time than its reported runs took.*"
                       r"the other kernel's worker needed around a run.*"
                       r"the first of two duels disagreed too")


def test_roofline_quarantine_still_stops_an_impossible_time(tmp_path):
    """The quarantine behind the clock check: a correct result whose median beats the
    roofline floor by more than the margin is `suspicious`, its `faster` not accepted."""
    from kernelcrew.results import CaseRow, CheckResult
    from kernelcrew.tools.backends.backend import get_backend
    from kernelcrew.tools.config import BenchSettings
    from kernelcrew.tools.judge.check import ROOFLINE_MARGIN, _peak_rates, roofline_quarantine

    spec = load_op(TINY)
    sizes = {"rows": 4096, "cols": 4096}  # 64 MiB per set: over the LLC, bandwidth counts
    gbps, gflops, cache, _ = _peak_rates(get_backend("cpu"))  # this machine's, measured
    floor = roofline_floor_ms(spec, sizes, gbps, gflops, cache, 2)
    assert floor > 0
    row = CaseRow(group="typical", case="rows=4096,cols=4096", sizes=sizes, status="pass",
                  median_ms=floor / ROOFLINE_MARGIN / 2)
    res = CheckResult(op=spec.name, kernel="k.cpp", backend="cpu", correct=True,
                      verdict="faster", speedup=9.0, reason="9x faster", rows=[row])
    out = roofline_quarantine(res, spec, get_backend("cpu"), BenchSettings())
    assert out.suspicious and out.verdict == "same"
    assert out.reason.startswith("suspicious: ") and "roofline floor" in out.reason


def test_roofline_floor_ignores_bandwidth_for_cache_resident_cases():
    spec = load_op(TINY)
    small = {"rows": 256, "cols": 1024}  # 1 MiB per input set
    # 10 GB/s, no flop peak: the bytes bound holds only when 2 sets overflow the cache
    assert roofline_floor_ms(spec, small, 10.0, None, 1 << 20, 2) == pytest.approx(
        spec.cost_bytes(small) / 10e9 * 1e3)
    assert roofline_floor_ms(spec, small, 10.0, None, 64 << 20, 2) == 0.0
    # the compute bound always holds
    assert roofline_floor_ms(spec, small, 10.0, 100.0, 64 << 20, 2) == pytest.approx(
        spec.cost_flops(small) / 100e9 * 1e3)


def test_thread_left_spinning_to_slow_the_baseline_is_rejected():
    """A kernel whose first call starts a thread that spins forever (honest math) would
    take a CPU from the baseline's timed runs; the parent waits for the kernel's threads
    to stop before each of them, and rejects the kernel when they never do."""
    j = judge("lingering_thread.cpp")
    assert_rejected(j, r"a thread of the kernel kept running after its calls returned: "
                       r"before \d+ of the other kernel's \d+ timed runs the parent waited "
                       r"50 ms for it to stop, in vain.*the first of two duels disagreed too")
