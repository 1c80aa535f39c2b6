"""The parent side of every kernel run: inputs, references, workers, judgment.

The parent makes the inputs in memory it owns (sealed shared buffers, see `shm`),
computes the float64 references itself, starts one sandboxed worker per kernel run and
drives it call by call (see `session`). It poisons the outputs before every call, reads
them from its own mapping after the call with the worker stopped, and times every call
with its own clock. Nothing the worker writes or says decides anything.

Every timed run finds its inputs new: every element of a float input scaled by a factor
near 1 drawn for that run, integer inputs with about 1 in 64 elements swapped
(`fresh_changes`), so no run's inputs repeat an earlier one's, an answer kept from an
earlier call is wrong, and finding what changed costs as much as computing. Which timed runs are checked in full is the
parent's secret (`plan_checks`); every timed run's outputs are sampled for elements left
unwritten.
"""

from __future__ import annotations

import os
import secrets
import shutil
import sys
import uuid
import zlib
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Self

import numpy as np

from kernelcrew.errors import InputError
from kernelcrew.kernels.formats import format_for
from kernelcrew.kernels.kernelfile import KernelFile
from kernelcrew.kernels.spec import DTYPES, INT_INPUTS, Case, OpSpec
from kernelcrew.results import CaseRow, CompileResult
from kernelcrew.tools.backends.backend import Backend
from kernelcrew.tools.backends.buffers import poison_int
from kernelcrew.tools.config import BenchSettings, Limits, scratch_root
from kernelcrew.tools.judge.records import (  # noqa: F401 - the harness's public names
    CHECKED_RUNS,
    REFRESH_PERIOD,
    CaseData,
    Changes,
    Flusher,
    KernelRun,
    case_cache_state,
    case_key,
    fail_row,
    load_error_hint,
    plan_checks,
    poison_all,
)
from kernelcrew.tools.judge.runs import solo
from kernelcrew.tools.judge.shm import Layout, SharedBuffer, Slot
from kernelcrew.tools.judge.verify import compare
from kernelcrew.tools.sandbox import SandboxRun, run_confined, sandbox_description

CHANGE_SHARE = 64  # a timed run finds about 1 in this many elements of each input swapped
CHANGE_MIN, CHANGE_MAX = 8, 1 << 16  # ... and at least / at most this many
SAMPLED = 1024  # elements of each output looked at after every timed run


class Harness:
    """Inputs and references for one operator, and the runs of kernels on them."""

    def __init__(self, spec: OpSpec, backend: Backend, *, seed: int | None = None,
                 limits: Limits | None = None, bench: BenchSettings | None = None,
                 cases: list[Case] | None = None) -> None:
        # the shape groups this backend runs (a CUDA op may size its own for a device)
        self.spec, self.backend = spec.for_backend(backend.name), backend
        self.seed = seed if seed is not None else secrets.randbits(31)
        self.limits, self.bench = limits or Limits(), bench or BenchSettings()
        self.cases = cases if cases is not None else list(self.spec.cases())
        self.root = scratch_root() / f"h-{spec.name}-{uuid.uuid4().hex[:8]}"
        self.root.mkdir(parents=True)
        self._data: dict[str, CaseData] = {}
        self._runs = 0
        self.llc_bytes = backend.cache_bytes()
        self._flusher: Flusher | None = None
        self.python = sys.executable

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        for d in self._data.values():
            d.close()
        self._data.clear()
        shutil.rmtree(self.root, ignore_errors=True)

    @property
    def flusher(self) -> Flusher:
        if self._flusher is None:
            self._flusher = Flusher(self.llc_bytes)
        return self._flusher

    # -- inputs and references ----------------------------------------------------
    def data(self, case: Case) -> CaseData:
        key = case_key(case)
        if key not in self._data:
            self._data[key] = self._make(case)
        return self._data[key]

    def make_arrays(self, case: Case, rng: np.random.Generator) -> dict[str, np.ndarray]:
        """One input set for a case: the op's make_inputs, else seeded standard normal
        (integers: small uniform)."""
        spec = self.spec
        make = spec.inputs_fn()
        if make:
            try:
                arrays = make(rng, **case.sizes)
            except Exception as e:  # noqa: BLE001 - user code from the op folder
                raise InputError(f"make_inputs failed for {case.label}: {type(e).__name__}: "
                                 f"{e}", path=spec.folder / "inputs.py") from None
        else:
            arrays = {}
        ins: dict[str, np.ndarray] = {}
        for name, t in spec.inputs.items():
            shape = spec.shape(name, case.sizes)
            dt = DTYPES[t.dtype]
            if name in arrays:
                a = np.ascontiguousarray(arrays[name], dtype=dt)
                if a.shape != shape:
                    raise InputError(f"make_inputs gave {name} shape {a.shape}, expected "
                                     f"{shape}", path=spec.folder / "inputs.py")
            elif dt.kind == "f":
                a = rng.standard_normal(shape).astype(dt)
                if t.domain is not None:
                    a = np.clip(a, *t.domain).astype(dt)
            else:
                lo, hi = INT_INPUTS.get(dt.name, (-8, 9))
                a = rng.integers(lo, hi, size=shape).astype(dt)
            ins[name] = a
        return ins

    def _make(self, case: Case, sets: list[dict[str, np.ndarray]] | None = None) -> CaseData:
        spec = self.spec
        if sets is None:
            sets = [self.make_arrays(case, np.random.default_rng(
                [self.seed, case.index, zlib.crc32(case.group.encode()), k]))
                for k in range(self.bench.input_sets)]
        layout = Layout()
        slots = [{n: layout.add(f"s{k}.{n}", a.dtype.name, a.shape) for n, a in ins.items()}
                 for k, ins in enumerate(sets)]
        buf = SharedBuffer(f"kernelcrew-in-{spec.name}", layout.size, readonly_for_worker=True)
        refs = []
        for k, ins in enumerate(sets):
            for n, a in ins.items():
                buf.array(slots[k][n])[...] = a
            refs.append(self.reference(case, ins))
        refreshed = tuple(n for n, t in spec.inputs.items() if t.refresh)
        base = [{n: a.copy() for n, a in ins.items() if n in refreshed and a.dtype.kind == "f"}
                for ins in sets]
        return CaseData(case, buf, slots, refs, refreshed, base)

    def fresh_changes(self, case: Case, k: int, seed: Sequence[int]) -> Changes:
        """Input set k made new for one run (see `Changes`): every float input scaled
        element by element, so no element a kernel kept from an earlier call is current
        and comparing costs as much as computing; integer inputs (indices, bins, whose
        values carry meaning) with about 1 in CHANGE_SHARE elements (CHANGE_MIN..
        CHANGE_MAX) swapped with others of the same input. Drawn from `seed`, so two
        kernels raced side by side find the same inputs in the same run, and one reference
        serves both."""
        d = self.data(case)
        rng = np.random.default_rng([*seed, case.index, zlib.crc32(case.group.encode()), k])
        where, scale = {}, {}
        for name in d.refreshed:
            flat = d.buffer.array(d.slots[k][name]).reshape(-1)
            n = flat.size
            if name in d.base[k]:
                mag = np.exp2(rng.uniform(-9, -6, size=REFRESH_PERIOD))
                factors = (1 + mag * rng.choice([-1, 1], size=REFRESH_PERIOD))
                scale[name] = (d.base[k][name], np.roll(factors, int(rng.integers(n or 1)))
                               .astype(flat.dtype), self.spec.inputs[name].domain)
                continue
            if n < 2:
                continue
            m = min(max(CHANGE_MIN, n // CHANGE_SHARE), CHANGE_MAX, n)
            dst = rng.integers(0, n, size=m)
            src = rng.integers(0, n, size=m)
            where[name] = (dst, flat[dst].copy(), flat[src].copy())
        return Changes(k, where, scale)

    def _reference_kw(self, case: Case, ins: dict[str, np.ndarray]) -> dict:
        kw = {n: (a.astype(np.float64) if a.dtype.kind == "f" else np.array(a))
              for n, a in ins.items()}
        kw.update({n: s.value for n, s in self.spec.scalars.items()})
        kw.update(case.sizes)
        return kw

    def time_reference(self, reps: int = 5) -> dict[str, float]:
        """Median milliseconds of the op's own reference (e.g. NumPy) per typical case, in
        this process, on the first input set: what the kernels are compared with when the
        reference is the only implementation the user had."""
        import time

        out: dict[str, float] = {}
        fn = self.spec.reference_fn()
        for case in (c for c in self.cases if c.group == "typical"):
            kw = self._reference_kw(case, self.data(case).inputs(0))
            fn(**kw)  # warm-up
            times = []
            for _ in range(max(3, reps)):
                t = time.perf_counter()
                fn(**kw)
                times.append((time.perf_counter() - t) * 1e3)
            out[case_key(case)] = float(np.median(times))
        return out

    def reference(self, case: Case, ins: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """The op's float64 reference on one input set (computed here, by the parent)."""
        spec = self.spec
        kw = self._reference_kw(case, ins)
        path = spec.folder / "reference.py"
        try:
            out = spec.reference_fn()(**kw)
        except InputError:
            raise
        except Exception as e:  # noqa: BLE001 - user code from the op folder
            raise InputError(f"reference raised {type(e).__name__}: {e} (case {case.label})",
                             path=path) from None
        if not isinstance(out, dict) or set(out) != set(spec.outputs):
            raise InputError(f"reference must return a dict with keys {sorted(spec.outputs)}, "
                             f"got {sorted(out) if isinstance(out, dict) else type(out).__name__}",
                             path=path)
        res = {}
        for name in spec.outputs:
            arr = np.asarray(out[name], dtype=np.float64)
            shape = spec.shape(name, case.sizes)
            if arr.shape != shape:
                raise InputError(f"reference output {name} has shape {arr.shape}, op.yaml says "
                                 f"{shape} for {case.label}", path=path)
            res[name] = arr
        return res

    # -- a worker's job -------------------------------------------------------------
    def output_layout(self) -> tuple[Layout, list[list[dict[str, Slot]]]]:
        """Where a worker's outputs live: per case, per input set, each output. Cases
        run one after another, so they share the same space."""
        size, per_case = 0, []
        for c in self.cases:
            lay = Layout()
            per_case.append([{n: lay.add(f"s{k}.{n}", t.dtype, self.spec.shape(n, c.sizes))
                              for n, t in self.spec.outputs.items()}
                             for k in range(len(self.data(c).slots))])
            size = max(size, lay.size)
        total = Layout()
        total.size = size
        return total, per_case

    def job(self, comp: CompileResult, kf: KernelFile, outputs: SharedBuffer,
            out_slots: list[list[dict[str, Slot]]]) -> dict:
        spec = self.spec
        sig = []
        for name, kind in spec.signature():
            dtype = (spec.inputs.get(name) or spec.outputs.get(name) or
                     spec.scalars.get(name))
            sig.append({"name": name, "kind": kind, "dtype": dtype.dtype if dtype else "int64"})
        cases = []
        for ci, c in enumerate(self.cases):
            d = self.data(c)
            cases.append({
                "id": f"{c.group}{c.index}", "key": case_key(c), "sizes": c.sizes,
                "scalars": {n: s.value for n, s in spec.scalars.items()},
                "inputs": {"fd": d.buffer.fd, "size": d.buffer.size,
                           "sets": [{n: s.to_json() for n, s in st.items()} for st in d.slots]},
                "outputs": [{n: s.to_json() for n, s in st.items()} for st in out_slots[ci]],
                "cache": self.cache_state(c),
            })
        return {
            "backend": self.backend.name, "artifact": comp.artifact, "entry": kf.meta.entry,
            # host code: a library whose `entry` the worker calls; device code: launches
            "code": format_for(self.backend.name).code,
            "launch": [x.model_dump() for x in kf.meta.launch],
            "temps": {n: t.model_dump() for n, t in kf.meta.temps.items()},
            "knobs": kf.meta.knobs, "signature": sig, "cases": cases,
            "outputs": {"fd": outputs.fd, "size": outputs.size},
            "guard": self.backend.untrusted_host,
            "llc_bytes": self.llc_bytes,
        }

    def new_run_dir(self) -> Path:
        self._runs += 1
        out_dir = self.root / f"run{self._runs}"
        out_dir.mkdir()
        return out_dir

    def cache_state(self, c: Case) -> str:
        """`cold` or `warm`: how this case's timed runs find the caches (see
        docs/judging.md, 'Timing: a duel'). The op's `cache:` (or --cache / KERNELCREW_CACHE) decides; `auto`
        is warm when the rotating working set (input sets x the op's bytes per call) fits
        in half the last-level cache, so the data would stay cache-resident between
        calls, and cold otherwise."""
        return case_cache_state(self.bench.cache or self.spec.cache, self.llc_bytes,
                                self.bench.input_sets * self.spec.cost_bytes(c.sizes))

    def confined(self, job: dict, out_dir: Path, wrap: Sequence[str] = (),
                 timeout_s: float | None = None, pass_fds: Sequence[int] = (),
                 on_start: Callable[[int], None] | None = None, notify: int | None = None,
                 notify_ready: Callable[[bool], None] | None = None) -> SandboxRun:
        env = {"PYTHONPATH": os.pathsep.join(p for p in sys.path if p),
               "PYTHONDONTWRITEBYTECODE": "1", **self.backend.worker_env()}
        return run_confined(
            [self.python, "-m", "kernelcrew.tools.judge.worker", str(out_dir / "job.json")],
            tool=wrap, scratch=out_dir, readonly=[],
            timeout_s=timeout_s if timeout_s is not None else self.limits.timeout_s,
            address_space_gib=self.backend.worker_address_space_gib(self.limits),
            devices=self.backend.worker_devices(),
            file_size_mib=self.limits.file_size_mib, processes=self.limits.processes,
            open_files=self.limits.open_files, env=env, log_name="worker",
            pass_fds=pass_fds, on_start=on_start, notify=notify, notify_ready=notify_ready)

    # -- running a kernel ---------------------------------------------------------
    def run(self, comp: CompileResult, kf: KernelFile, *, mode: str = "bench",
            reps: int | None = None, wrap: Sequence[str] = (), keep: bool = False,
            judge: bool = True) -> KernelRun:
        """Run the compiled kernel in a fresh sandboxed worker, alone, and judge it:
        `verify` (the first call on every input set), or `bench` (then `reps` timed
        runs per case). `wrap` is a profiler that starts the worker as its child inside
        the sandbox (`perf record ... --`, `ncu ...`); `keep` leaves the worker's scratch
        (and what the wrapper wrote there) until the harness closes; `judge=False` (a
        profiler's re-run of a kernel already judged) compares nothing: rows stay
        `pending`."""
        return solo(self, comp, kf, mode=mode, reps=self.bench.reps if reps is None else reps,
                    wrap=tuple(wrap), keep=keep, judge=judge)

    # -- judging outputs ------------------------------------------------------------
    def judge_outputs(self, c: Case, got: dict[str, np.ndarray], ref: dict[str, np.ndarray],
                      when: str, atol_scale: dict[str, float] | None = None
                      ) -> tuple[CaseRow | None, float, float]:
        """Compare one call's outputs (copied by the parent) with a reference: the failing
        row, or None and the largest errors. `atol_scale`: per output, a factor on the
        op's absolute tolerance (outputs of inputs far larger than the op's own, see
        `unseen`)."""
        tol = self.spec.tolerance
        max_abs = max_rel = 0.0
        for name in self.spec.outputs:
            atol = tol.atol * (atol_scale or {}).get(name, 1.0)
            cmp = compare(name, got[name], ref[name], tol.rtol, atol)
            if not cmp.ok:
                return fail_row(c, f"{when}: {cmp.detail}", cmp), 0.0, 0.0
            max_abs, max_rel = max(max_abs, cmp.max_abs_err), max(max_rel, cmp.max_rel_err)
        return None, max_abs, max_rel

    def unwritten(self, c: Case, got: dict[str, np.ndarray], base: dict[str, np.ndarray],
                  pick: np.random.Generator, when: str,
                  confirm: Callable[[], dict[str, np.ndarray]] | None = None
                  ) -> CaseRow | None:
        """A row when one of SAMPLED random elements of an output still holds the poison
        the parent wrote before the call (an output the call did not write). `base`: the
        reference of the same input set unchanged; where it holds the poison value itself
        the element is not judged here (a full check judges it). `confirm`: the reference
        of the inputs as they are now (changed since the first call), asked for only when
        an element looks unwritten: an integer output can hold the poison as its right
        value (one time in 256 for 8 bits) where a change moved it there."""
        for name, a in got.items():
            flat = a.reshape(-1)
            if not flat.size:
                continue
            idx = pick.integers(0, flat.size, size=min(SAMPLED, flat.size))
            vals, want = flat[idx], base[name].reshape(-1)[idx]
            if a.dtype.kind == "f":
                bad = np.isnan(vals) & ~np.isnan(want)
            else:
                p = poison_int(a.dtype)
                bad = (vals == p) & (want != p)
            if bad.any() and confirm is not None:
                now = confirm()[name].reshape(-1)[idx]
                bad &= ~np.isnan(now) if a.dtype.kind == "f" else now != p
            if bad.any():
                where = int(idx[int(np.argmax(bad))])
                return CaseRow(group=c.group, case=c.label, sizes=c.sizes, status="fail",
                               detail=f"{when}: {name}: elements left unwritten (still the "
                                      f"poison the parent wrote before the call), e.g. at "
                                      f"flat index {where}", output=name, cause="unwritten",
                               worst_index=[where])
        return None

    @staticmethod
    def sandbox() -> str:
        return sandbox_description()

    def fresh_outputs(self) -> tuple[SharedBuffer, list[list[dict[str, Slot]]]]:
        lay, slots = self.output_layout()
        return SharedBuffer(f"kernelcrew-out-{self.spec.name}", lay.size,
                            readonly_for_worker=False), slots
