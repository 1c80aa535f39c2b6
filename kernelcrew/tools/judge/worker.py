"""The worker: runs ONE kernel in its own (sandboxed) process.

Usage: python -m kernelcrew.tools.judge.worker JOB.json

It loads the compiled artifact, and for each shape case: loads the parent's input
sets, allocates NaN-poisoned outputs, calls the kernel once per input set and saves
what it wrote (snapshotted the moment the call returns), then (bench mode) warms up
and times repeated calls rotating over the input sets, and saves the outputs of some
timed runs for the parent to check again: the last run of every set, one run picked at
random, and the run that got the case's probe. A probe changes a few input elements
in place (same buffer, a handful of values) for one timed run picked at random, so a
kernel that replays answers it cached per buffer (or per sampled values) is caught,
and it cannot know which timed call is checked. It judges nothing: the parent
computes the reference and decides. Progress goes to `progress.jsonl` line by line,
so a crash leaves the case it died on.

In `duel` mode (two kernels raced side by side) the worker times its case one run at a
time, each run started and ended by a handshake with the parent (see `Link`), so the
two kernels alternate many times within one pair of worker processes and the parent
measures every run with its own clock. There the parent picks which runs are checked
and which gets the probe, the same for both kernels, and tells the worker run by run.
"""

from __future__ import annotations

import ctypes
import json
import os
import random
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from kernelcrew.tools.backends.buffers import checksum, poison
from kernelcrew.tools.backends.cuda_runtime import CudaRuntime

_CTYPES = {
    "float32": ctypes.c_float, "float64": ctypes.c_double, "float16": ctypes.c_uint16,
    "int32": ctypes.c_int32, "int64": ctypes.c_int64, "uint8": ctypes.c_uint8,
    "int8": ctypes.c_int8, "uint16": ctypes.c_uint16, "int16": ctypes.c_int16,
    "uint32": ctypes.c_uint32,
}


class CpuRuntime:
    """Calls `extern "C" entry(...)` in a shared library through ctypes."""

    def __init__(self, job: dict) -> None:
        self.lib = ctypes.CDLL(job["artifact"])
        self.fn = getattr(self.lib, job["entry"])
        self.fn.restype = None
        self.sig = job["signature"]
        self.set_llc(int(job.get("llc_bytes") or 32 << 20))

    def prepare(self, case: dict, inputs: dict[str, np.ndarray]) -> dict:
        outs = {name: np.empty(spec["shape"], dtype=spec["dtype"])
                for name, spec in case["outputs"].items()}
        args: list[Any] = []
        for item in self.sig:
            name, kind = item["name"], item["kind"]
            if kind == "input":
                args.append(ctypes.c_void_p(inputs[name].ctypes.data))
            elif kind == "output":
                args.append(ctypes.c_void_p(outs[name].ctypes.data))
            elif kind == "scalar":
                v = case["scalars"][name]
                args.append(_CTYPES[item["dtype"]](v))
            else:
                args.append(ctypes.c_int64(case["sizes"][name]))
        return {"inputs": inputs, "outputs": outs, "args": args}

    def poison(self, st: dict) -> None:
        for a in st["outputs"].values():
            poison(a)

    def set_llc(self, nbytes: int) -> None:
        # a read-only sweep over twice the last-level cache evicts what the previous
        # call (and the NaN poisoning) left there; dirty lines are written back during
        # the sweep, not during the timed call, and the sweep leaves only clean lines
        self.flush_buf = np.ones(max(2 * nbytes, 1 << 20) // 8, dtype=np.uint64)

    def flush(self) -> None:
        self._sink = int(self.flush_buf.sum())

    def settle(self) -> None:
        """Wait until what was set up before a call has finished (nothing to wait for on
        the CPU)."""

    def call(self, st: dict) -> float:
        t0 = time.perf_counter_ns()
        self.fn(*st["args"])
        return (time.perf_counter_ns() - t0) / 1e6

    def snapshot(self, st: dict) -> dict[str, np.ndarray]:
        return {k: v.copy() for k, v in st["outputs"].items()}

    def input_checksums(self, st: dict) -> dict[str, str]:
        return {k: checksum(v) for k, v in st["inputs"].items()}


EXTRA_CHECKED_RUNS = 1  # timed runs checked at random, besides the last of each set


def plan_checks(reps: int, nsets: int, probe_sets: list[int], pick: random.Random
                ) -> tuple[dict[int, int], set[int]]:
    """Which timed runs of a case get a probe (run -> probe index) and which are checked
    (their outputs saved for the parent): the last run of every input set, each probe's
    run, and EXTRA_CHECKED_RUNS picked at random."""
    probe_at: dict[int, int] = {}
    for i, s in enumerate(probe_sets):
        runs = [r for r in range(reps) if r % nsets == s and r not in probe_at]
        if runs:
            probe_at[pick.choice(runs)] = i
    checked = set(range(max(0, reps - nsets), reps)) | set(probe_at)
    checked |= set(pick.sample(range(reps), min(reps, EXTRA_CHECKED_RUNS)))
    return probe_at, checked


def _xp(a: Any) -> Any:
    """The array module of `a`: NumPy, or CuPy (which the CUDA runtime imported)."""
    return np if isinstance(a, np.ndarray) else sys.modules["cupy"]


def apply_changes(st: dict, changes: dict[str, dict]) -> dict[str, dict]:
    """Set a few input elements in place (a probe); returns what undoes it.

    Works on NumPy and CuPy arrays alike (flat views of contiguous buffers)."""
    undo = {}
    for name, ch in changes.items():
        a = st["inputs"][name]
        xp = _xp(a)
        flat = a.reshape(-1)
        idx = xp.asarray(ch["idx"], dtype=np.int64)
        undo[name] = {"idx": ch["idx"], "val": flat[idx].copy()}
        flat[idx] = xp.asarray(ch["val"], dtype=a.dtype)
    return undo


def undo_changes(st: dict, undo: dict[str, dict]) -> None:
    for name, ch in undo.items():
        a = st["inputs"][name]
        a.reshape(-1)[_xp(a).asarray(ch["idx"], dtype=np.int64)] = ch["val"]


def _runtime(job: dict):
    if job["backend"] == "cpu":
        return CpuRuntime(job)
    return CudaRuntime(job)  # needs CuPy and a device


class Case:
    """One shape case in a worker: its input sets, verified first calls, and timed runs.

    The timed runs are numbered 0..reps-1 over the whole case, whether they run in one
    go (`bench`) or one by one as the parent asks (`duel`). Which runs are checked (the
    last of every input set, one at random, the probe's, see `plan_checks`) is decided
    up front by the worker in `bench`, by the parent run by run in a duel (`planned`
    False: the parent's `go` names the run's probe, its `time` whether it is checked)."""

    def __init__(self, rt: Any, case: dict, out_dir: Path, reps: int,
                 planned: bool = True) -> None:
        self.rt, self.case, self.out_dir, self.reps = rt, case, out_dir, reps
        self.cid = case["id"]
        sets = [{n: np.load(p) for n, p in s.items()} for s in case["input_sets"]]
        self.states = [rt.prepare(case, s) for s in sets]
        self.saved: dict[str, Any] = {"verify": [], "timed": []}
        self.times: list[float] = []
        self.snaps: dict[int, dict[str, np.ndarray]] = {}
        self._undo: dict[str, dict] | None = None
        self.probe_at: dict[int, int] = {}
        self.checked: set[int] = set()
        if planned:
            self.probe_at, self.checked = plan_checks(
                reps, len(self.states), [p["set"] for p in case.get("probes", [])],
                random.SystemRandom())

    def plan_next(self, probe: int | None = None, check: bool | None = None) -> None:
        """The parent's plan for the next timed run (a duel): its probe (before
        `prepare`), whether its outputs are checked (before `run_prepared`)."""
        r = len(self.times)
        if probe is not None and 0 <= probe < len(self.case.get("probes", [])):
            self.probe_at[r] = probe
        if check:
            self.checked.add(r)

    def verify(self) -> None:
        for k, st in enumerate(self.states):
            self.rt.poison(st)
            self.rt.call(st)
            self.saved["verify"].append(self._save(f"v{k}", self.rt.snapshot(st)))
        if hasattr(self.rt, "set_repeats"):
            # one count of back-to-back runs per timing for the whole case, the largest:
            # the parent scales every reported time of the case by it. Counted per input
            # set, a first call slowed by an idle GPU (+20 us on an H200) gave one set 2
            # runs per timing and the other 13, and the cross-check rejected honest kernels
            n = max(self.rt.repeats(st) for st in self.states)
            for st in self.states:
                self.rt.set_repeats(st, n)

    def warmup(self, n: int) -> None:
        for w in range(n):
            st = self.states[w % len(self.states)]
            self.rt.poison(st)
            self.rt.call(st)

    def timed(self, n: int) -> None:
        """The next n timed runs (rotating over the input sets)."""
        for _ in range(n):
            if self.prepare():
                self.run_prepared()

    def prepare(self) -> bool:
        """Set up the next timed run: its probe (if it has one), NaN-poisoned outputs, and
        for a `cold` case the cache flush (after the poisoning, so the poisoned lines are
        evicted too). False when all runs are done."""
        r = len(self.times)
        if r >= self.reps:
            return False
        k = r % len(self.states)
        self._undo = apply_changes(self.states[k], self.case["probes"][self.probe_at[r]]["changes"]) \
            if r in self.probe_at else None
        self.rt.poison(self.states[k])
        if self.case.get("cache", "cold") == "cold":
            self.rt.flush()
        self.rt.settle()
        return True

    def run_prepared(self) -> None:
        r = len(self.times)
        k = r % len(self.states)
        self.times.append(self.rt.call(self.states[k]))
        if r in self.checked:
            self.snaps[r] = self.rt.snapshot(self.states[k])
        if self._undo is not None:
            undo_changes(self.states[k], self._undo)

    def _save(self, tag: str, snap: dict[str, np.ndarray]) -> dict[str, str]:
        files = {}
        for name, arr in snap.items():
            files[name] = str(self.out_dir / f"{self.cid}_{tag}_{name}.npy")
            np.save(files[name], arr)
        return files

    def report(self) -> dict:
        nsets = len(self.states)
        for r, snap in sorted(self.snaps.items()):
            self.saved["timed"].append({"set": r % nsets, "run": r, "probe": self.probe_at.get(r),
                                        "files": self._save(f"t{r}", snap)})
        # CUDA: runs of the plan per timing (a small plan is timed N times back to back)
        repeats = [self.rt.repeats(st) for st in self.states] if hasattr(self.rt, "repeats") else []
        return {"event": "done", "case": self.cid, "times_ms": self.times,
                "outputs": self.saved,
                "input_checksums": [self.rt.input_checksums(st) for st in self.states],
                "runs_per_timing": max(repeats, default=1)}


class Link:
    """The parent's handshake (`duel` mode): two FIFOs in the scratch directory. The
    worker says `ready CASE` when a case is verified and warm. For each timed run the
    parent says `go CASE WARMUP PROBE` (the probe's index, -1 for none), the worker sets
    the run up and says `warm CASE`, the parent says `time CHECK` (1: save the run's
    outputs) and the worker runs it and answers `done CASE`; `end CASE` saves the case.
    The parent timestamps each run from its side of the pipe, out of the kernel's reach,
    and checks the times the worker reports against its own clock."""

    def __init__(self, job: dict) -> None:
        # The parent holds both FIFOs open before the worker starts. A plain open() of a
        # FIFO waits for the other end: a worker that got here after the parent gave up
        # (closed its ends when the other kernel failed, or died) would wait forever.
        # Opened without waiting, the reply FIFO has no reader then (ENXIO) and the
        # command FIFO no writer (the first read is the end of file): the worker exits.
        try:
            tx = os.open(job["fifo_reply"], os.O_WRONLY | os.O_NONBLOCK)
        except OSError:
            raise SystemExit(0) from None  # the parent went away: nothing left to do
        rx = os.open(job["fifo_cmd"], os.O_RDONLY | os.O_NONBLOCK)
        os.set_blocking(tx, True)
        os.set_blocking(rx, True)
        self.tx = os.fdopen(tx, "w", buffering=1)
        self.rx = os.fdopen(rx)

    def say(self, *words: object) -> None:
        self.tx.write(" ".join(map(str, words)) + "\n")

    def hear(self) -> list[str]:
        line = self.rx.readline()
        if not line:
            raise SystemExit(0)  # the parent went away: nothing left to do
        return line.split()


def main(job_path: str) -> int:
    job = json.loads(Path(job_path).read_text())
    out_dir = Path(job["out_dir"])
    progress_path = out_dir / "progress.jsonl"

    def note(**kw: Any) -> None:
        # open/append/close per event: a crash right after still leaves the line on disk
        with open(progress_path, "a") as f:
            f.write(json.dumps(kw) + "\n")

    rt = _runtime(job)
    note(event="loaded")
    duel = job["mode"] == "duel"
    link = Link(job) if duel else None
    if link is not None:
        link.say("loaded")
    for spec in job["cases"]:
        note(event="case", case=spec["id"])
        case = Case(rt, spec, out_dir, job["reps"] if job["mode"] != "verify" else 0,
                    planned=not duel)
        case.verify()
        if job["mode"] == "bench":
            case.warmup(job["warmup"])
            case.timed(job["reps"])
        elif link is not None:
            case.warmup(job["warmup"])
            link.say("ready", case.cid)
            while (cmd := link.hear())[0] == "go":
                # `go CASE WARMUP PROBE`: one timed run, which starts warm in warm mode
                # (the other kernel ran in between) and is set up (its probe, poisoned
                # outputs, the flush when cold) before the parent's clock starts, so the
                # parent times the call alone; `time CHECK` starts it
                case.warmup(int(cmd[2]))
                case.plan_next(probe=int(cmd[3]))
                ready = case.prepare()
                link.say("warm", case.cid)
                start = link.hear()
                if start[0] != "time":
                    return 3
                if ready:
                    case.plan_next(check=start[1] == "1")
                    case.run_prepared()
                link.say("done", case.cid)
        note(**case.report())
        if link is not None:
            link.say("saved", case.cid)
        del case
    note(event="finished")
    if link is not None:
        link.say("bye")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
