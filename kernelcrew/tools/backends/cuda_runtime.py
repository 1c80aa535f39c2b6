"""The worker's CUDA runtime: loads a cubin with CuPy and runs its launch plan.

Same interface as `CpuRuntime` in worker.py. The harness owns every host step: it
uploads inputs, allocates (and NaN-poisons) outputs and temps, evaluates grid, block
and shared memory from the kernel file's expressions, launches the kernels in order on
one stream between two events, and flushes L2 before each cold timed call (a read-only
sweep: see CudaRuntime.__init__). Any CUDA error
(an illegal address, a bad launch) is raised: the worker dies and the parent records
the verdict. Launch-plan arithmetic is plain Python (`plan_launches`) so it is tested
without a device.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from kernelcrew.kernels.expr import evaluate
from kernelcrew.tools.backends.buffers import poison_int

MAX_THREADS_PER_BLOCK = 1024
MAX_BLOCK = (1024, 1024, 64)
MAX_GRID = (2**31 - 1, 65535, 65535)
DEFAULT_SHARED_LIMIT = 48 * 1024  # dynamic shared memory above this needs an opt-in
# One event pair resolves about 0.5 us and a launch costs a few: a plan that runs for less
# than MIN_TIMED_MS is timed as `repeats` back-to-back runs of the plan between one pair of
# events (the mean per run is returned, the count recorded), so small kernels are measured
# rather than lost under the floor. Only the first of the repeats follows a cold L2 flush.
MIN_TIMED_MS = 0.05
MAX_REPEATS = 1000


def repeats_for(single_ms: float, *, min_ms: float = MIN_TIMED_MS,
                max_repeats: int = MAX_REPEATS) -> int:
    """How many back-to-back runs of a plan one timing takes, from one run's time."""
    if single_ms >= min_ms:
        return 1
    return max(2, min(max_repeats, math.ceil(min_ms / max(single_ms, min_ms / max_repeats))))


class LaunchError(ValueError):
    """A launch plan that cannot be launched (bad dimensions); names launch[i] and why."""


@dataclass(frozen=True)
class LaunchDims:
    index: int  # position in the kernel file's `launch:` list
    kernel: str
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    shared_bytes: int
    args: tuple[str, ...]

    @property
    def skipped(self) -> bool:
        """A zero grid (e.g. a size-0 case) launches nothing."""
        return 0 in self.grid

    @property
    def threads_per_block(self) -> int:
        return math.prod(self.block)


def int_knobs(knobs: dict[str, Any]) -> dict[str, int]:
    """Knobs usable in expressions (integers; float knobs only reach the source)."""
    return {k: int(v) for k, v in knobs.items()
            if isinstance(v, int) and not isinstance(v, bool)}


def _dims(exprs: list[str | int], env: dict[str, int], where: str) -> tuple[int, int, int]:
    vals = [evaluate(e, env) for e in exprs]
    if len(vals) > 3:
        raise LaunchError(f"{where} has {len(vals)} dimensions; at most 3")
    return tuple(vals + [1] * (3 - len(vals)))  # type: ignore[return-value]


def plan_launches(launch: list[dict], knobs: dict[str, Any], sizes: dict[str, int], *,
                  max_shared_bytes: int | None = None) -> list[LaunchDims]:
    """Evaluate and validate every launch of a kernel file for one case's sizes."""
    env = {**int_knobs(knobs), **sizes}
    plans = []
    for i, spec in enumerate(launch):
        where = f"launch[{i}] ({spec['kernel']})"
        grid = _dims(spec["grid"], env, f"{where} grid")
        block = _dims(spec["block"], env, f"{where} block")
        shared = evaluate(spec.get("shared_bytes", 0), env)
        if any(b <= 0 for b in block):
            raise LaunchError(f"{where} block {block} for {sizes}: every dimension must be >= 1")
        if math.prod(block) > MAX_THREADS_PER_BLOCK:
            raise LaunchError(f"{where} block {block} for {sizes} has {math.prod(block)} "
                              f"threads; at most {MAX_THREADS_PER_BLOCK}")
        if any(b > m for b, m in zip(block, MAX_BLOCK, strict=True)):
            raise LaunchError(f"{where} block {block} exceeds the per-dimension limits "
                              f"{MAX_BLOCK}")
        if any(g < 0 for g in grid):
            raise LaunchError(f"{where} grid {grid} for {sizes} is negative")
        if any(g > m for g, m in zip(grid, MAX_GRID, strict=True)):
            raise LaunchError(f"{where} grid {grid} for {sizes} exceeds the limits {MAX_GRID}")
        if shared < 0:
            raise LaunchError(f"{where} shared_bytes {shared} for {sizes} is negative")
        if max_shared_bytes is not None and shared > max_shared_bytes:
            raise LaunchError(f"{where} shared_bytes {shared} for {sizes} exceeds the device's "
                              f"{max_shared_bytes} bytes per block")
        plans.append(LaunchDims(i, spec["kernel"], grid, block, shared, tuple(spec["args"])))
    return plans


def temp_shapes(temps: dict[str, dict], knobs: dict[str, Any],
                sizes: dict[str, int]) -> dict[str, tuple[tuple[int, ...], str]]:
    """name -> (shape, dtype) of every temp for one case."""
    env = {**int_knobs(knobs), **sizes}
    out = {}
    for name, t in temps.items():
        shape = tuple(evaluate(d, env) for d in t["shape"])
        if any(d < 0 for d in shape):
            raise LaunchError(f"temp {name!r} shape {shape} for {sizes} is negative")
        out[name] = (shape, t["dtype"])
    return out


class CudaRuntime:
    """Runs a cubin's launch plan through CuPy on device 0, on one stream."""

    def __init__(self, job: dict) -> None:
        import cupy as cp  # imported here: the module is importable without CuPy

        self.cp = cp
        cp.cuda.Device(0).use()
        props = cp.cuda.runtime.getDeviceProperties(0)
        self.max_shared = int(props.get("sharedMemPerBlockOptin") or DEFAULT_SHARED_LIMIT)
        self.launch, self.knobs, self.temps = job["launch"], job["knobs"], job["temps"]
        self.sig = {item["name"]: item for item in job["signature"]}
        # loads the module now, so a bad cubin fails "while loading the kernel"
        self.module = cp.RawModule(path=job["artifact"])
        self.kernels = {name: self.module.get_function(name)
                        for name in dict.fromkeys(x["kernel"] for x in self.launch)}
        self._opted_in: dict[str, int] = {}
        self.stream = cp.cuda.Stream(non_blocking=True)
        self.stream.use()  # uploads, poisoning, flushes and launches: one stream, in order
        # a cold timed call is preceded by a read-only sweep over twice the L2 size: it
        # evicts what the previous call (and the NaN poisoning) left in L2, and leaves
        # only clean lines, so the timed kernel writes back nothing it did not write.
        # The sweep is a copy to pinned host memory: the copy engine reads the buffer
        # through L2 and writes nothing on the device (a memset of the buffer would
        # leave L2 full of dirty lines for the timed kernel to write back)
        self.flush_buf = cp.empty(max(2 * int(props["l2CacheSize"]), 1 << 20), dtype=cp.uint8)
        self._memset(self.flush_buf, 0)  # its pages exist before the first sweep
        self.flush_host = cp.cuda.alloc_pinned_memory(self.flush_buf.nbytes)
        self.start, self.end = cp.cuda.Event(), cp.cuda.Event()

    def prepare(self, case: dict, inputs: dict[str, np.ndarray],
                outputs: dict[str, np.ndarray]) -> dict:
        """One input set of a case on the device. `inputs` and `outputs` are the parent's
        shared buffers (host memory): inputs are uploaded before every call (the parent
        changes a few elements for each timed run), outputs copied back after it."""
        cp = self.cp
        sizes = case["sizes"]
        ins = {n: cp.asarray(np.ascontiguousarray(a)) for n, a in inputs.items()}
        outs = {n: cp.empty(tuple(o.shape), dtype=o.dtype) for n, o in outputs.items()}
        temps = {n: cp.empty(shape, dtype=dt)
                 for n, (shape, dt) in temp_shapes(self.temps, self.knobs, sizes).items()}
        arrays = {**ins, **outs, **temps}
        plan = []
        for d in plan_launches(self.launch, self.knobs, sizes, max_shared_bytes=self.max_shared):
            if d.skipped:
                continue  # CuPy would round a 0 up to 1 and launch a block anyway
            args = tuple(self._arg(name, arrays, case) for name in d.args)
            self._opt_in_shared(d.kernel, d.shared_bytes)
            plan.append((self.kernels[d.kernel], d.grid, d.block, d.shared_bytes, args))
        self.stream.synchronize()
        return {"inputs": ins, "outputs": outs, "temps": temps, "plan": plan,
                "host_in": inputs, "host_out": outputs}

    def _arg(self, name: str, arrays: dict[str, Any], case: dict) -> Any:
        if name in arrays:
            return arrays[name]
        item = self.sig[name]
        if item["kind"] == "size":
            return np.int64(case["sizes"][name])  # `long long`
        return np.dtype(item["dtype"]).type(case["scalars"][name])

    def _opt_in_shared(self, kernel: str, shared: int) -> None:
        if shared > DEFAULT_SHARED_LIMIT and self._opted_in.get(kernel, 0) < shared:
            self.kernels[kernel].max_dynamic_shared_size_bytes = shared
            self._opted_in[kernel] = shared

    def _memset(self, a: Any, byte: int) -> None:
        if a.nbytes:
            self.cp.cuda.runtime.memsetAsync(a.data.ptr, byte, a.nbytes, self.stream.ptr)

    def poison(self, st: dict) -> None:
        for a in [*st["outputs"].values(), *st["temps"].values()]:
            if a.dtype.kind == "f":
                # all-ones bytes are a NaN in float16/32/64; a memset needs no kernel
                # compiled at run time (CuPy's fill would JIT one with NVRTC)
                self._memset(a, 0xFF)
            else:
                a.fill(poison_int(a.dtype))

    def flush(self) -> None:
        """Evict L2 with a read-only sweep (on the stream, before the start event)."""
        rt = self.cp.cuda.runtime
        rt.memcpyAsync(self.flush_host.ptr, self.flush_buf.data.ptr, self.flush_buf.nbytes,
                       rt.memcpyDeviceToHost, self.stream.ptr)

    def call(self, st: dict, cold: bool, check: bool = False) -> str:
        """One call as the worker's `call` command runs it: the inputs uploaded again from
        the parent's buffers, outputs and temps poisoned, L2 flushed when cold, the plan
        timed between two events, the outputs copied back to the parent's buffers. Returns
        "MS N": ms per run, and the runs of the plan one timing took (see `timed`); with
        `check`, then "modified=NAMES" when the kernel changed its inputs on the device (a
        kernel must leave them as it found them: they are its caller's data)."""
        for n, a in st["inputs"].items():
            a.set(np.ascontiguousarray(st["host_in"][n]), stream=self.stream)
        self.poison(st)
        if cold:
            self.flush()
        self.stream.synchronize()
        ms = self.timed(st)
        for n, a in st["outputs"].items():
            st["host_out"][n][...] = a.get(stream=self.stream)
        self.stream.synchronize()
        reply = f"{ms!r} {self.repeats(st)}"
        if check:
            changed = [n for n, a in st["inputs"].items()
                       if not np.array_equal(a.get(stream=self.stream), st["host_in"][n])]
            if changed:
                reply += " modified=" + ",".join(changed)
        return reply

    def timed(self, st: dict) -> float:
        """One timing of the plan, in ms per run. The first timing of a state times a
        single run; if that is under MIN_TIMED_MS, later timings take `st["repeats"]` runs
        between one pair of events and return the mean (in a cold case only the first of
        them follows the flush)."""
        n = st.get("repeats", 1)
        self.start.record(self.stream)
        for _ in range(n):
            for kernel, grid, block, shared, args in st["plan"]:
                kernel(grid, block, args, shared_mem=shared, stream=self.stream)
        self.end.record(self.stream)
        self.end.synchronize()  # raises a CUDA error the kernels hit (illegal address ...)
        ms = float(self.cp.cuda.get_elapsed_time(self.start, self.end)) / n
        if "repeats" not in st:
            st["repeats"] = repeats_for(ms)
        return ms

    def unify(self, states: list[dict]) -> None:
        """One count of back-to-back runs per timing for a whole case, the largest of its
        input sets' (each timed once here, untimed for the verdict): counted per set, a
        first call slowed by an idle GPU (+20 us on an H200) gave one set 2 runs per
        timing and the other 13, and honest kernels read as inconsistent."""
        for st in states:
            self.timed(st)
        n = max((self.repeats(st) for st in states), default=1)
        for st in states:
            st["repeats"] = n

    def repeats(self, st: dict) -> int:
        """Runs of the plan per timing for this state (1: one run per event pair)."""
        return int(st.get("repeats", 1))
