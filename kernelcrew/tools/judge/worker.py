"""The worker: a pair of hands for ONE kernel, in its own sandboxed process.

Usage: python -m kernelcrew.tools.judge.worker JOB.json

A CPU kernel runs inside this process, so from the moment it is loaded nothing this
process writes or says is evidence: it calls the kernel when the parent asks, on
buffers the parent owns, and the parent reads the results from its own mapping of them,
times every call with its own clock and stops this process between calls (see
`session` and `procs`). The worker therefore reports no times, no checksums and no
outputs of its own; it only says when it has done what it was asked.

Before the kernel is loaded the process is still trusted: it reads the job, maps the
parent's buffers (inputs read-only: they are sealed against writing, see `shm`), says
`hello` (the parent then identifies it, see `procs.find_worker`), answers the parent's
calibration calls, and, for a CPU kernel, puts the guard on itself (no new processes, no
signal handlers, no exec: see `confine.install_guard`).

Commands, one line each, over two FIFOs in the scratch directory; one reply each:
  null            -> done          a call of nothing (the parent measures its overhead)
  load            -> loaded        load the kernel
  case I          -> ready         set up case I: arguments for each input set
  call K COLD CHK -> done [MS N]   one call on input set K (CUDA: the events' time per run
                                   and how many back-to-back runs a timing took, and with
                                   CHK=1 `modified=NAMES` if the kernel changed its inputs)
  warm K N        -> done          N calls on input set K, not timed
  end             -> bye
After each reply the worker stops itself (SIGSTOP) when the job says so; the parent
continues it for the next command.
"""

from __future__ import annotations

import ctypes
import json
import os
import signal
import sys
from pathlib import Path
from typing import Any

import numpy as np

from kernelcrew.tools.judge.shm import Slot, map_for_worker, view

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

    def prepare(self, case: dict, inputs: dict[str, np.ndarray],
                outputs: dict[str, np.ndarray]) -> dict:
        args: list[Any] = []
        for item in self.sig:
            name, kind = item["name"], item["kind"]
            if kind == "input":
                args.append(ctypes.c_void_p(inputs[name].ctypes.data))
            elif kind == "output":
                args.append(ctypes.c_void_p(outputs[name].ctypes.data))
            elif kind == "scalar":
                args.append(_CTYPES[item["dtype"]](case["scalars"][name]))
            else:
                args.append(ctypes.c_int64(case["sizes"][name]))
        return {"args": args}

    def unify(self, states: list[dict]) -> None:
        """Nothing to agree on between a case's input sets (see CudaRuntime.unify)."""

    def call(self, st: dict, cold: bool, check: bool = False) -> str:
        """One call; the parent times it (and flushed the cache when cold; its inputs are
        read-only memory, so `check` has nothing to look at)."""
        self.fn(*st["args"])
        return ""


def _runtime(job: dict):
    """How the worker runs this job's kernels: by the kernel format's kind of code, never by
    the backend's name (a new backend with host code runs through CpuRuntime)."""
    if job["code"] == "host":
        return CpuRuntime(job)
    from kernelcrew.tools.backends.cuda_runtime import CudaRuntime

    return CudaRuntime(job)  # needs CuPy and a device


class Link:
    """The worker's end of the two FIFOs the parent made (see the module text)."""

    def __init__(self, job: dict) -> None:
        # The parent holds both FIFOs open before the worker starts. A plain open() of a
        # FIFO waits for the other end: a worker that got here after the parent gave up
        # would wait forever. Opened without waiting, the reply FIFO has no reader then
        # (ENXIO) and the command FIFO no writer (the first read is the end of file).
        try:
            tx = os.open(job["fifo_reply"], os.O_WRONLY | os.O_NONBLOCK)
        except OSError:
            raise SystemExit(0) from None  # the parent went away: nothing left to do
        rx = os.open(job["fifo_cmd"], os.O_RDONLY | os.O_NONBLOCK)
        os.set_blocking(tx, True)
        os.set_blocking(rx, True)
        self.tx = os.fdopen(tx, "w", buffering=1)
        self.rx = os.fdopen(rx)
        self.freeze = bool(job.get("freeze"))

    def say(self, *words: object) -> None:
        self.tx.write(" ".join(map(str, words)) + "\n")
        if self.freeze:
            # stopped until the parent continues it: nothing of the kernel runs meanwhile
            os.kill(os.getpid(), signal.SIGSTOP)

    def hear(self) -> list[str]:
        line = self.rx.readline()
        if not line:
            raise SystemExit(0)  # the parent went away: nothing left to do
        return line.split()


class Buffers:
    """The parent's buffers as this process maps them: outputs writable, inputs read-only."""

    def __init__(self, job: dict) -> None:
        out = job["outputs"]
        self.out_mm = map_for_worker(out["fd"], out["size"], writable=True)
        self.in_mm: dict[int, Any] = {}

    def case(self, spec: dict) -> tuple[list[dict[str, np.ndarray]], list[dict[str, np.ndarray]]]:
        """(inputs per set, outputs per set) of one case, as arrays on the shared memory."""
        fd = spec["inputs"]["fd"]
        if fd not in self.in_mm:
            self.in_mm[fd] = map_for_worker(fd, spec["inputs"]["size"], writable=False)
        mm = self.in_mm[fd]
        ins = [{n: view(mm, Slot.from_json(s)) for n, s in st.items()}
               for st in spec["inputs"]["sets"]]
        outs = [{n: view(self.out_mm, Slot.from_json(s)) for n, s in st.items()}
                for st in spec["outputs"]]
        return ins, outs


def serve(job: dict, link: Link) -> int:
    bufs = Buffers(job)
    rt: Any = None
    states: list[dict] = []
    link.say("hello")
    while True:
        cmd = link.hear()
        op = cmd[0]
        if op == "null":
            link.say("done")
        elif op == "load":
            if job.get("guard"):
                from kernelcrew.tools.confine import install_guard

                install_guard()
            rt = _runtime(job)
            link.say("loaded")
        elif op == "case":
            spec = job["cases"][int(cmd[1])]
            ins, outs = bufs.case(spec)
            states = [rt.prepare(spec, i, o) for i, o in zip(ins, outs, strict=True)]
            rt.unify(states)
            link.say("ready")
        elif op == "call":
            extra = rt.call(states[int(cmd[1])], cmd[2] == "1", cmd[3] == "1")
            link.say(*(["done", extra] if extra else ["done"]))
        elif op == "warm":
            st = states[int(cmd[1])]
            for _ in range(int(cmd[2])):
                rt.call(st, False)
            link.say("done")
        elif op == "end":
            link.freeze = False
            link.say("bye")
            return 0
        else:
            return 3


def main(job_path: str) -> int:
    job = json.loads(Path(job_path).read_text())
    return serve(job, Link(job))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
