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
"""

from __future__ import annotations

import ctypes
import json
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
    "int32": ctypes.c_int32, "int64": ctypes.c_int64,
}


class CpuRuntime:
    """Calls `extern "C" entry(...)` in a shared library through ctypes."""

    def __init__(self, job: dict) -> None:
        self.lib = ctypes.CDLL(job["artifact"])
        self.fn = getattr(self.lib, job["entry"])
        self.fn.restype = None
        self.sig = job["signature"]

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

    def call(self, st: dict) -> float:
        t0 = time.perf_counter_ns()
        self.fn(*st["args"])
        return (time.perf_counter_ns() - t0) / 1e6

    def snapshot(self, st: dict) -> dict[str, np.ndarray]:
        return {k: v.copy() for k, v in st["outputs"].items()}

    def input_checksums(self, st: dict) -> dict[str, str]:
        return {k: checksum(v) for k, v in st["inputs"].items()}


EXTRA_CHECKED_RUNS = 1  # timed runs checked at random, besides the last of each set


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
    for case in job["cases"]:
        cid = case["id"]
        note(event="case", case=cid)
        sets = [{n: np.load(p) for n, p in s.items()} for s in case["input_sets"]]
        states = [rt.prepare(case, s) for s in sets]
        saved: dict[str, Any] = {"verify": [], "timed": []}
        for k, st in enumerate(states):
            rt.poison(st)
            rt.call(st)
            snap = rt.snapshot(st)
            files = {}
            for name, arr in snap.items():
                files[name] = str(out_dir / f"{cid}_v{k}_{name}.npy")
                np.save(files[name], arr)
            saved["verify"].append(files)
        times: list[float] = []
        if job["mode"] == "bench":
            for w in range(job["warmup"]):
                rt.call(states[w % len(states)])
            reps, nsets = job["reps"], len(states)
            # which timed runs are checked is decided here, at random, after the kernel
            # is loaded: the kernel cannot tell a checked call from another
            pick = random.SystemRandom()
            probe_at: dict[int, int] = {}
            for i, probe in enumerate(case.get("probes", [])):
                runs = [r for r in range(reps) if r % nsets == probe["set"] and r not in probe_at]
                if runs:
                    probe_at[pick.choice(runs)] = i
            checked = set(range(max(0, reps - nsets), reps)) | set(probe_at)
            checked |= set(pick.sample(range(reps), min(reps, EXTRA_CHECKED_RUNS)))
            snaps: dict[int, dict[str, np.ndarray]] = {}
            for r in range(reps):
                k = r % nsets
                undo = apply_changes(states[k], case["probes"][probe_at[r]]["changes"]) \
                    if r in probe_at else None
                rt.poison(states[k])
                times.append(rt.call(states[k]))
                if r in checked:
                    snaps[r] = rt.snapshot(states[k])
                if undo is not None:
                    undo_changes(states[k], undo)
            for r, snap in sorted(snaps.items()):
                files = {}
                for name, arr in snap.items():
                    files[name] = str(out_dir / f"{cid}_t{r}_{name}.npy")
                    np.save(files[name], arr)
                saved["timed"].append({"set": r % nsets, "run": r, "probe": probe_at.get(r),
                                       "files": files})
        repeats = [rt.repeats(st) for st in states] if hasattr(rt, "repeats") else []
        note(event="done", case=cid, times_ms=times, outputs=saved,
             input_checksums=[rt.input_checksums(st) for st in states],
             runs_per_timing=max(repeats, default=1))
        del states, sets
    note(event="finished")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
