"""Timing tricks: every timed run finds its inputs changed and its outputs poisoned, three
secret runs per case are checked in full, the parent's own clock times every call, and
a time the machine cannot reach is quarantined.

The attacks on the worker's clock and reports (patched_timer, forged_timing,
lingering_thread) were rejected by cross-checks of what the worker reported; the worker
now reports nothing the verdict uses, so they have nothing to forge: each is judged on
its honest math, and gains nothing (`assert_no_gain`)."""

from __future__ import annotations

import pytest

from kernelcrew.kernels.spec import load_op
from kernelcrew.tools.judge.judge import roofline_floor_ms
from tests.adversarial.conftest import (
    KERNELS,
    NO_GAIN,
    TINY,
    assert_no_gain,
    assert_rejected,
    judge,
    needs_resolver,
)

KERNELS_USED = {"timed_garbage.cpp", "replay_other_set.cpp", "replay_keyed.cpp",
                "forged_timing.cpp", "patched_timer.cpp", "lingering_thread.cpp",
                "skip_counted.cpp"}
TIMED = r"timed run \d+ \(inputs changed since the first call\), input set \d: "


def test_timed_outputs_are_verified_again():
    """Correct on the first call per buffer, garbage on every later call: the secret
    full checks of timed runs reject it."""
    j = judge("timed_garbage.cpp")
    assert_rejected(j, TIMED + r"out: \d+ of \d+ elements outside tolerance")


def test_replay_of_another_sets_verified_output_gains_nothing():
    """Correct when verified; when timed with the inputs unchanged, another input set's
    verified answer. Every element of every float input of a timed run is new (scaled by
    a factor drawn for the run), so the kernel's own test ("these are the inputs I was
    verified on") never holds on a timed run: it computes honestly and gains nothing."""
    assert_no_gain(judge("replay_other_set.cpp", **NO_GAIN))


def test_replay_keyed_by_buffer_and_sampled_values_gains_nothing():
    """One cached answer per input buffer, keyed by a few sampled input values: every
    element of a timed run's inputs is new, so the sampled values never match a kept key,
    the kernel computes honestly and gains nothing (a kernel that replayed anyway would
    meet the secret full checks: `test_skipping_counted_calls_is_rejected`)."""
    assert_no_gain(judge("replay_keyed.cpp", **NO_GAIN))


@pytest.mark.parametrize("stale", [1, 0])
def test_skipping_counted_calls_is_rejected(stale: int, tmp_path):
    """Two calls in three skipped, counted per buffer: a skipped call that copies a kept
    answer back (stale=1) is caught by the secret full checks (three of the four timed
    runs here), one that writes nothing (stale=0) by the poison scan of every run."""
    src = (KERNELS / "skip_counted.cpp").read_text()
    kernel = tmp_path / f"skip_counted_{stale}.cpp"
    kernel.write_text(src.replace("knobs: {STALE: 1}", f"knobs: {{STALE: {stale}}}", 1))
    j = judge(kernel)
    if stale:
        assert_rejected(j, TIMED + r"out: \d+ of \d+ elements outside tolerance")
    else:
        assert_rejected(j, TIMED + r"out: elements left unwritten \(still the poison the "
                               r"parent wrote before the call\)")


@needs_resolver
def test_forged_reports_are_rejected():
    """A kernel that makes every reply of the worker carry a time of 0.000001 ms per run
    and writes a forged progress report at exit: the parent reads no time and no file of
    the worker's on the CPU, and a reply that is more than the word its command asked for
    breaks the handshake: rejected at the first one."""
    j = judge("forged_timing.cpp", **NO_GAIN)
    assert_rejected(j, r"kernel broke the worker's handshake with the parent \(expected "
                       r"'done', got 'done 0\.000001 1'\)")


@needs_resolver
def test_patched_timers_gain_nothing():
    """A kernel that slows the worker's clocks to a third (honest math): the worker times
    nothing, the parent's clock in the parent's process times every call."""
    assert_no_gain(judge("patched_timer.cpp", **NO_GAIN))


@needs_resolver
def test_thread_left_spinning_to_slow_the_baseline_gains_nothing():
    """A kernel whose first call starts a thread that spins forever (honest math) would
    take a CPU from the baseline's timed runs; the worker is stopped, every thread of it,
    whenever the other kernel runs, so the spinner only slows its own kernel."""
    assert_no_gain(judge("lingering_thread.cpp", **NO_GAIN))


def test_roofline_quarantine_still_stops_an_impossible_time():
    """The quarantine behind the clock: a correct result whose median beats the roofline
    floor by more than the margin is `suspicious`, its `faster` not accepted."""
    from kernelcrew.results import CaseRow
    from kernelcrew.tools.backends.backend import get_backend
    from kernelcrew.tools.judge.judge import ROOFLINE_MARGIN, roofline_finding

    spec = load_op(TINY)
    be = get_backend("cpu")
    pk = be.peak_rates()  # this machine's, measured
    # over the LLC (bandwidth counts), and large enough that the impossible time stays over
    # the timing floor on a machine of any bandwidth (a case under the floor says nothing)
    rows = 4096
    while True:
        sizes = {"rows": rows, "cols": 4096}
        floor = roofline_floor_ms(spec, sizes, pk.gbps, pk.gflops, pk.cache_bytes, 2,
                                  pk.cache_gbps)
        assert floor > 0
        if floor / ROOFLINE_MARGIN / 2 >= 2 * be.timing_floor_ms:
            break
        rows *= 2
    case = f"rows={rows},cols=4096"
    row = CaseRow(group="typical", case=case, sizes=sizes, status="pass",
                  median_ms=floor / ROOFLINE_MARGIN / 2)
    why = roofline_finding([row], spec, be, 2)
    assert why.startswith(f"suspicious: typical case {case} took "), why
    assert "under the roofline floor" in why and "quarantined, not accepted" in why
    honest = row.model_copy(update={"median_ms": floor * 1.5})
    assert roofline_finding([honest], spec, be, 2) == ""


def test_roofline_floor_uses_the_cache_bandwidth_for_cache_resident_cases():
    spec = load_op(TINY)
    small = {"rows": 256, "cols": 1024}  # 1 MiB per input set
    # 10 GB/s from memory, 100 GB/s from the cache, no flop peak: the memory bound holds
    # when 2 sets overflow the cache, the cache's bound when they fit
    assert roofline_floor_ms(spec, small, 10.0, None, 1 << 20, 2, 100.0) == pytest.approx(
        spec.cost_bytes(small) / 10e9 * 1e3)
    assert roofline_floor_ms(spec, small, 10.0, None, 64 << 20, 2, 100.0) == pytest.approx(
        spec.cost_bytes(small) / 100e9 * 1e3)
    # no cache bandwidth measured: nothing bounds a cache-resident case by bytes
    assert roofline_floor_ms(spec, small, 10.0, None, 64 << 20, 2) == 0.0
    # the compute bound always holds
    assert roofline_floor_ms(spec, small, 10.0, 100.0, 64 << 20, 2) == pytest.approx(
        spec.cost_flops(small) / 100e9 * 1e3)
