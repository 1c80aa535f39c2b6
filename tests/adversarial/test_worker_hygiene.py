"""No worker outlives its duel: however a duel ends, every process of a worker's sandbox
is gone a moment after the parent returns, and a parent that is killed takes its workers
with it.

Each test gives the run a scratch folder of its own and watches /proc for the processes
working in the run folders under it (`WorkerWatch`, which tells the worker from its
sandbox by the process tree, not by a command line a kernel could rewrite), so the
workers of other tests and of other runs on the machine are not counted. The worker timeout of the checks is long
(60 s): a duel that waited for it instead of ending its workers would exceed the
test's limit (120 s) by far, whatever the load of the machine.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kernelcrew.kernels.kernelfile import load_kernel
from kernelcrew.kernels.spec import load_op
from kernelcrew.tools.backends.backend import get_backend
from kernelcrew.tools.config import BenchSettings, Limits
from kernelcrew.tools.judge.duel import duel
from kernelcrew.tools.judge.harness import Harness
from tests.adversarial.conftest import (
    KERNELS,
    ROOT,
    TINY,
    WorkerWatch,
    assert_judged_normally,
    assert_none_left,
    assert_rejected,
    judge,
    needs_resolver,
    workers_under,
)

KERNELS_USED = {"breaks_handshake.cpp", "fake_load_error.cpp", "never_returns.cpp",
                "late_self_stop.cpp"}
LONG_TIMEOUT = 60  # the worker timeout: the duel must end long before it
LIMIT_S = 120


@needs_resolver
def test_kernel_that_breaks_the_handshake_then_sleeps_is_killed(tmp_path: Path):
    """The kernel writes a reply the parent did not ask for to every descriptor it has and
    then sleeps in its call: the parent's command wanted the word `done` alone, so the
    kernel is rejected at that line, at once; the sleeping worker is killed, not waited
    for."""
    scratch = tmp_path / "scratch"
    with WorkerWatch(scratch) as watch:
        j = judge("breaks_handshake.cpp", timeout=LONG_TIMEOUT, limit_s=LIMIT_S,
                  env={"KERNELCREW_SCRATCH": str(scratch)})
    assert_rejected(j, r"^kernel broke the worker's handshake with the parent \(expected "
                       r"'done', got 'done typical0'\) in case typical\[0\]")
    watch.worker("run1"), watch.worker("run2")  # both workers ran
    assert_none_left(scratch)


@needs_resolver
def test_worker_that_dies_at_load_leaves_no_other_worker_waiting(tmp_path: Path):
    """The candidate's worker dies while loading the library (its constructor exits): the
    duel ends before the baseline's worker starts, or that worker finds the parent's pipes
    closed and exits (it used to wait in the open of its FIFO until the worker timeout)."""
    scratch = tmp_path / "scratch"
    with WorkerWatch(scratch) as watch:
        j = judge("fake_load_error.cpp", timeout=LONG_TIMEOUT, limit_s=LIMIT_S,
                  env={"KERNELCREW_SCRATCH": str(scratch)})
    assert_rejected(j, r"kernel exited with code 1 while loading the kernel")
    watch.worker("run1")  # the candidate's worker started (and died loading its kernel)
    assert_none_left(scratch)


def test_exception_in_the_parent_between_the_two_starts_ends_the_first_worker(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """The parent raises after the first worker started, while setting up the second (its
    run directory exists already: a real FileExistsError, no stand-in): the exception
    reaches the caller, and the first worker is ended, not left waiting for commands."""
    scratch = tmp_path / "scratch"
    monkeypatch.setenv("KERNELCREW_SCRATCH", str(scratch))
    spec = load_op(TINY)
    be = get_backend("cpu")
    kf = load_kernel(spec.baseline_path("cpu"))
    comp = be.compile(kf, spec)
    assert comp.ok, comp.reason
    Harness.sandbox()  # the confinement probes, once per process: not inside the window
    with Harness(spec, be, seed=1, limits=Limits(timeout_s=LONG_TIMEOUT),
                 bench=BenchSettings(reps=2), cases=list(spec.cases())[:1]) as h, \
            WorkerWatch(scratch) as watch:
        (h.root / "run2").mkdir()  # where the second worker's job goes
        with pytest.raises(FileExistsError):
            duel(h, (comp, kf), (comp, kf))
        assert_none_left(scratch, within_s=5.0)
    watch.worker("run1")  # the first worker started


def test_killed_parent_takes_its_workers_with_it(tmp_path: Path):
    """`kernelcrew check` is killed (SIGKILL: no cleanup of its own runs) while the
    candidate's worker spins in its call: the worker and its sandbox die with it (the
    parent-death signal), they are not re-parented and left running."""
    scratch = tmp_path / "scratch"
    cmd = [sys.executable, "-m", "kernelcrew.cli", "check", str(TINY),
           str(KERNELS / "never_returns.cpp"), "--json", "--reps", "4",
           "--timeout", str(LONG_TIMEOUT)]
    with WorkerWatch(scratch) as watch:
        cli = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL,
                               env={**os.environ, "KERNELCREW_SCRATCH": str(scratch)})
        try:
            deadline = time.monotonic() + LIMIT_S
            # both workers are up (the candidate's has loaded its kernel: the duel starts
            # the second worker after that), then the candidate's spins in its first call:
            # half a second of CPU time more than it had then
            base = None
            while time.monotonic() < deadline and cli.poll() is None:
                workers = workers_under(scratch)
                if {"run1", "run2"} <= set(workers):
                    base = workers["run1"].cpu_s if base is None else base
                    if workers["run1"].cpu_s - base >= 0.5:
                        break
                time.sleep(0.05)
            assert cli.poll() is None, "the check ended before it could be killed"
            assert base is not None, "the two workers were never seen at once"
            cli.send_signal(signal.SIGKILL)
            cli.wait()
        finally:
            if cli.poll() is None:
                cli.kill()
                cli.wait()
        assert_none_left(scratch, within_s=5.0)
    assert watch.worker("run1") and watch.worker("run2")


@needs_resolver
def test_a_late_self_stop_costs_time_not_the_verdict():
    """An honest kernel whose worker waits 50 ms between its reply and its own SIGSTOP is
    judged on its math, not timed out."""
    j = judge("late_self_stop.cpp", timeout=10)
    assert_judged_normally(j)
