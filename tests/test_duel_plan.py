"""The parent plans a duel, the same for both kernels, and keeps the plan to itself (real
workers, real processes).

Timed run r of a case finds the same input changes for both kernels (one float64
reference serves both when r is checked), and the same runs are checked in full: the
comparison is like with like. Which runs are checked is drawn afresh per duel and case,
and a worker cannot tell a checked run from another: a kernel that skips its work on
some timed calls is caught by the check it could not see coming."""

from __future__ import annotations

import hashlib
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from kernelcrew.kernels.kernelfile import load_kernel
from kernelcrew.kernels.spec import load_op
from kernelcrew.tools.backends.backend import get_backend
from kernelcrew.tools.config import BenchSettings
from kernelcrew.tools.judge.duel import duel
from kernelcrew.tools.judge.gate import load_outliers
from kernelcrew.tools.judge.harness import CHECKED_RUNS, Harness, case_key
from kernelcrew.tools.judge.runs import Contender
from tests.adversarial.conftest import KERNELS, TINY

# attack kernels under tests/adversarial/kernels/ judged here (test_attacks checks that
# every kernel file there is judged by some test)
KERNELS_USED = {"skip_counted.cpp", "spins_in_some_rounds.cpp"}

REPS = 6


def _digest(changes) -> str:
    h = hashlib.blake2b(digest_size=8)
    h.update(str(changes.set).encode())
    for name, (idx, old, new) in sorted(changes.where.items()):
        h.update(name.encode())
        for a in (idx, old, new):
            h.update(np.ascontiguousarray(a).tobytes())
    for name, (_, factors, _) in sorted(changes.scale.items()):
        h.update(name.encode() + np.ascontiguousarray(factors).tobytes())
    return h.hexdigest()


@pytest.fixture
def tiny():
    spec = load_op(TINY)
    be = get_backend("cpu")
    kf = load_kernel(spec.baseline_path("cpu"))
    comp = be.compile(kf, spec)
    assert comp.ok, comp.reason
    return spec, be, (comp, kf)


@pytest.fixture
def plan_seen(monkeypatch: pytest.MonkeyPatch) -> dict[str, list[tuple]]:
    """Every timed run each kernel of a duel made, as the parent asked for it: per kernel
    ("a", "b"), (case, run, input set, checked, digest of the run's input changes, how
    many elements changed)."""
    seen: dict[str, list[tuple]] = {"a": [], "b": []}
    timed = Contender.timed

    def recording(self, ci, r, changes, checked, ref_for, cold, judge=True):
        n = sum(len(idx) for idx, _, _ in changes.where.values()) + \
            sum(base.size for base, _, _ in changes.scale.values())
        seen[self.name].append((ci, r, changes.set, checked, _digest(changes), n))
        return timed(self, ci, r, changes, checked, ref_for, cold, judge)

    monkeypatch.setattr(Contender, "timed", recording)
    return seen


def test_both_kernels_get_the_same_plan(tiny, plan_seen):
    spec, be, k = tiny
    picks = set()
    with Harness(spec, be, seed=1, bench=BenchSettings(reps=REPS, rounds=2, input_sets=2)) as h:
        for _ in range(3):
            for runs in plan_seen.values():
                runs.clear()
            d = duel(h, k, k)
            assert d.a.correct and d.b.correct, (d.a.first_failure(), d.b.first_failure())
            a, b = sorted(plan_seen["a"]), sorted(plan_seen["b"])
            assert a == b, "the two kernels were given different runs"
            for ci, c in enumerate(h.cases):
                runs = [x for x in a if x[0] == ci]
                assert [x[1] for x in runs] == list(range(REPS))
                checked = frozenset(x[1] for x in runs if x[3])
                # the random picks and the last run of each of the two input sets
                last = {REPS - 2, REPS - 1}
                assert last <= checked and len(checked - last) <= CHECKED_RUNS
                assert len(checked) >= min(REPS, CHECKED_RUNS)
                # no two timed runs of a case find the same inputs, and every element of
                # the float input is new in every run
                n = c.sizes["rows"] * c.sizes["cols"]
                assert len({x[4] for x in runs}) == REPS and {x[5] for x in runs} == {n}
                picks.add((case_key(c), checked))
    # the checked runs are the parent's pick, drawn afresh per duel and case
    assert len(picks) > len(h.cases)


def test_a_kernel_cannot_tell_a_checked_run(tiny, plan_seen, tmp_path: Path):
    """A kernel that skips its work on two calls in three (copying back a kept answer) is
    caught at a timed run the parent checked, one the kernel could not see coming: the
    first failing run is among the checked runs, and the runs before it that it skipped
    were not checked."""
    spec, be, base = tiny
    kf = load_kernel(KERNELS / "skip_counted.cpp")
    comp = be.compile(kf, spec)
    assert comp.ok, comp.reason
    with Harness(spec, be, seed=1, bench=BenchSettings(reps=REPS, rounds=2)) as h:
        d = duel(h, (comp, kf), base)
    assert d.failed == "a" and not d.a.correct
    failing = next(r for r in d.a.rows if r.status == "fail")
    assert "(inputs changed since the first call)" in failing.detail, failing.detail
    assert "outside tolerance" in failing.detail, failing.detail
    last = plan_seen["a"][-1]  # the run that failed is the last the kernel made
    assert last[3], f"the failing run {last[1]} was not one the parent checked"


def _spin_kernel(spec, be):
    kf = load_kernel(KERNELS / "spins_in_some_rounds.cpp")
    comp = be.compile(kf, spec)
    assert comp.ok, comp.reason
    return comp, kf


def test_a_kernels_own_cpu_time_does_not_make_a_round_busy(tiny):
    """A kernel that spins tens of ms on every third call (spins_in_some_rounds.cpp) keeps
    the machine's cores busy in the rounds with its slow calls; the busy share the gate
    drops rounds by leaves out the judge's own processes, so none of those rounds reads
    as another job's load."""
    spec, be, base = tiny
    with Harness(spec, be, seed=1, bench=BenchSettings(reps=12, rounds=12)) as h:
        d = duel(h, _spin_kernel(spec, be), base)
    assert d.a.correct and d.b.correct
    assert not load_outliers(d.busy) and max(d.busy) < 0.25, d.busy


def test_another_jobs_load_still_makes_rounds_busy(tiny):
    """The control: with a real other job on every core for the whole duel (both kernels
    the spinning one, so that each round lasts long enough for /proc's 10 ms ticks), the
    rounds' busy share is high: the share still sees load that is not the judge's."""
    spec, be, _ = tiny
    ncpu = len(os.sched_getaffinity(0))
    hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(ncpu)]
    try:
        time.sleep(0.5)
        with Harness(spec, be, seed=1, bench=BenchSettings(reps=12, rounds=12)) as h:
            d = duel(h, _spin_kernel(spec, be), _spin_kernel(spec, be))
    finally:
        for p in hogs:
            p.kill()
            p.wait()
    assert d.a.correct and d.b.correct
    assert statistics.median(d.busy) > 0.2, d.busy
