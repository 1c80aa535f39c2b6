"""Timing tricks: outputs of timed runs are checked again, replays keyed by buffer meet
a probe, and a time the machine cannot reach is quarantined."""

from __future__ import annotations

import pytest

from kernelcrew.kernels.spec import load_op
from kernelcrew.tools.judge.check import roofline_floor_ms
from tests.adversarial.conftest import EVASIVE_ARCH, TINY, assert_rejected, judge

KERNELS_USED = {"timed_garbage.cpp", "replay_other_set.cpp", "replay_keyed.cpp",
                "forged_timing.cpp"}


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
def test_forged_timing_is_quarantined_not_accepted():
    """A kernel that rewrites the worker's report to 1e-6 ms per call is correct, but its
    `faster` is not accepted: the times are under the roofline floor."""
    j = judge("forged_timing.cpp")
    assert j.rc == 0, j.stdout + j.stderr
    assert j.doc["correct"] is True
    assert j.doc["suspicious"] is True, j.reason
    assert j.verdict == "same", j.reason
    assert j.reason.startswith("suspicious: ") and "roofline floor" in j.reason


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
