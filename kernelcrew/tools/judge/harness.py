"""The parent side of every kernel run: inputs, references, workers, judgment.

The parent makes the inputs, computes the float64 reference itself, starts one
sandboxed worker per kernel run, and judges what the worker wrote. Nothing the
kernel says about itself is trusted.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import secrets
import shutil
import sys
import time
import uuid
import zlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Self

import numpy as np

from kernelcrew.errors import InputError
from kernelcrew.kernels.kernelfile import KernelFile
from kernelcrew.kernels.spec import DTYPES, INT_INPUTS, Case, OpSpec
from kernelcrew.results import CaseRow, CompileResult, WorkerOutcome
from kernelcrew.tools.backends.backend import Backend
from kernelcrew.tools.backends.buffers import checksum
from kernelcrew.tools.config import BenchSettings, Limits, scratch_root
from kernelcrew.tools.judge.verify import compare
from kernelcrew.tools.sandbox import SandboxRun, run_confined, sandbox_description

PROBE_ELEMENTS = 8  # input elements a probe changes, per input


@dataclass
class Probe:
    """A few input elements of one input set changed in place for one timed run."""

    set: int  # the input set it changes
    changes: dict[str, dict[str, list]]  # input name -> {"idx": flat indices, "val": values}
    reference: dict[str, np.ndarray]  # the reference for the changed inputs


@dataclass
class CaseData:
    case: Case
    input_files: list[dict[str, str]]  # per input set: name -> .npy
    checksums: list[dict[str, str]]
    references: list[dict[str, np.ndarray]]
    probes: list[Probe] = field(default_factory=list)


@dataclass
class KernelRun:
    """One worker's run of one kernel over the cases, judged."""

    outcome: WorkerOutcome
    rows: list[CaseRow]
    samples: dict[str, list[float]] = field(default_factory=dict)  # case key -> ms
    out_dir: Path | None = None  # the worker's scratch, when the caller asked to keep it
    # case key -> runs of the plan behind each timing (CUDA times a short plan N times
    # back to back and reports ms per run; 1 on the CPU)
    repeats: dict[str, int] = field(default_factory=dict)

    @property
    def correct(self) -> bool:
        return self.outcome.ok and all(r.status == "pass" for r in self.rows)

    def first_failure(self) -> str:
        # cases the worker finished are judged even when it died later (a thread the
        # kernel left running may crash the worker after the wrong output was caught)
        wrong = next((f"wrong result in {r.group} case {r.case}: {r.detail}" for r in self.rows
                      if r.status == "fail" and r.detail != self.outcome.reason), "")
        if not self.outcome.ok:
            return self.outcome.reason + (f"; before that: {wrong}" if wrong else "")
        return wrong


def case_key(c: Case) -> str:
    return f"{c.group}[{c.index}]"



def case_cache_state(mode: str, llc_bytes: int | None, working_set: int) -> str:
    """`cold` or `warm` for a case whose rotating input sets move `working_set` bytes per
    round: the mode itself unless it is `auto`, then warm when that fits in half the
    last-level cache (the data would stay resident between calls), cold otherwise. The one
    rule for the kernels' harness and for the peers timed next to them."""
    if mode != "auto":
        return mode
    return "warm" if llc_bytes and working_set * 2 <= llc_bytes else "cold"

class Harness:
    """Inputs and references for one operator, and the runs of kernels on them."""

    def __init__(self, spec: OpSpec, backend: Backend, *, seed: int | None = None,
                 limits: Limits | None = None, bench: BenchSettings | None = None,
                 cases: list[Case] | None = None) -> None:
        self.spec, self.backend = spec, backend
        self.seed = seed if seed is not None else secrets.randbits(31)
        self.limits, self.bench = limits or Limits(), bench or BenchSettings()
        self.cases = cases if cases is not None else list(spec.cases())
        self.root = scratch_root() / f"h-{spec.name}-{uuid.uuid4().hex[:8]}"
        self.inputs_dir = self.root / "inputs"
        self.inputs_dir.mkdir(parents=True)
        self._data: dict[str, CaseData] = {}
        self._runs = 0
        self.llc_bytes = backend.cache_bytes() if hasattr(backend, "cache_bytes") else None

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)

    # -- inputs and references ----------------------------------------------------
    def data(self, case: Case) -> CaseData:
        key = case_key(case)
        if key not in self._data:
            self._data[key] = self._make(case)
        return self._data[key]

    def _make(self, case: Case) -> CaseData:
        spec = self.spec
        make = spec.inputs_fn()
        files, sums, refs, sets = [], [], [], []
        for k in range(self.bench.input_sets):
            rng = np.random.default_rng([self.seed, case.index, zlib.crc32(case.group.encode()), k])
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
                else:
                    lo, hi = INT_INPUTS.get(dt.name, (-8, 9))
                    a = rng.integers(lo, hi, size=shape).astype(dt)
                ins[name] = a
            d = self.inputs_dir / f"{case.group}{case.index}_s{k}"
            d.mkdir()
            fs = {}
            for name, a in ins.items():
                fs[name] = str(d / f"{name}.npy")
                np.save(fs[name], a)
            files.append(fs)
            sums.append({n: checksum(a) for n, a in ins.items()})
            refs.append(self._reference(case, ins))
            sets.append(ins)
        rng = np.random.default_rng([self.seed, case.index, zlib.crc32(case.group.encode()),
                                     self.bench.input_sets, 0x9E0B])
        probe = self._probe(case, sets, int(rng.integers(len(sets))), rng)
        return CaseData(case, files, sums, refs, [probe] if probe else [])

    def _probe(self, case: Case, sets: list[dict[str, np.ndarray]], k: int,
               rng: np.random.Generator) -> Probe | None:
        """Input set k with a few elements of every input replaced by values taken from
        other positions of the same input (so they stay in the input's domain)."""
        changed = {n: a.copy() for n, a in sets[k].items()}
        changes: dict[str, dict[str, list]] = {}
        for name, a in changed.items():
            flat = a.reshape(-1)
            if flat.size < 2:
                continue
            idx = rng.choice(flat.size, size=min(PROBE_ELEMENTS, flat.size), replace=False)
            src = rng.integers(0, flat.size, size=idx.size)
            keep = flat[src] != flat[idx]
            idx, src = idx[keep], src[keep]
            if idx.size:
                flat[idx] = flat[src]
                changes[name] = {"idx": idx.tolist(), "val": flat[idx].tolist()}
        if not changes:
            return None
        return Probe(k, changes, self._reference(case, changed))

    def _reference_kw(self, case: Case, ins: dict[str, np.ndarray]) -> dict:
        kw = {n: (a.astype(np.float64) if a.dtype.kind == "f" else a) for n, a in ins.items()}
        kw.update({n: s.value for n, s in self.spec.scalars.items()})
        kw.update(case.sizes)
        return kw

    def time_reference(self, reps: int = 5) -> dict[str, float]:
        """Median milliseconds of the op's own reference (e.g. NumPy) per typical case, in
        this process, on the first input set: what the kernels are compared with when the
        reference is the only implementation the user had."""
        out: dict[str, float] = {}
        fn = self.spec.reference_fn()
        for case in (c for c in self.cases if c.group == "typical"):
            files = self.data(case).input_files[0]
            kw = self._reference_kw(case, {n: np.load(f) for n, f in files.items()})
            fn(**kw)  # warm-up
            times = []
            for _ in range(max(3, reps)):
                t = time.perf_counter()
                fn(**kw)
                times.append((time.perf_counter() - t) * 1e3)
            out[case_key(case)] = float(np.median(times))
        return out

    def _reference(self, case: Case, ins: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
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

    # -- running a kernel ---------------------------------------------------------
    def job(self, comp: CompileResult, kf: KernelFile, mode: str, reps: int,
            out_dir: Path) -> dict:
        spec = self.spec
        sig = []
        for name, kind in spec.signature():
            dtype = (spec.inputs.get(name) or spec.outputs.get(name) or
                     spec.scalars.get(name))
            sig.append({"name": name, "kind": kind, "dtype": dtype.dtype if dtype else "int64"})
        cases = []
        for c in self.cases:
            d = self.data(c)
            cases.append({
                "id": f"{c.group}{c.index}",
                "key": case_key(c),
                "sizes": c.sizes,
                "scalars": {n: s.value for n, s in spec.scalars.items()},
                "input_sets": d.input_files,
                "probes": [{"set": p.set, "changes": p.changes} for p in d.probes],
                "outputs": {n: {"shape": list(spec.shape(n, c.sizes)), "dtype": t.dtype}
                            for n, t in spec.outputs.items()},
                "cache": self.cache_state(c),
            })
        return {
            "backend": self.backend.name, "artifact": comp.artifact, "entry": kf.meta.entry,
            "launch": [x.model_dump() for x in kf.meta.launch],
            "temps": {n: t.model_dump() for n, t in kf.meta.temps.items()},
            "knobs": kf.meta.knobs, "signature": sig, "cases": cases, "mode": mode,
            "reps": reps, "warmup": self.bench.warmup, "out_dir": str(out_dir),
            "llc_bytes": self.llc_bytes,
        }

    def cache_state(self, c: Case) -> str:
        """`cold` or `warm`: how this case's timed runs find the caches (see README,
        'Cache state'). The op's `cache:` (or --cache / KERNELCREW_CACHE) decides; `auto`
        is warm when the rotating working set (input sets x the op's bytes per call) fits
        in half the last-level cache, so the data would stay cache-resident between
        calls, and cold otherwise."""
        return case_cache_state(self.bench.cache or self.spec.cache, self.llc_bytes,
                                self.bench.input_sets * self.spec.cost_bytes(c.sizes))

    def run(self, comp: CompileResult, kf: KernelFile, *, mode: str = "bench",
            reps: int | None = None, wrap: Sequence[str] = (), keep: bool = False,
            judge: bool = True) -> KernelRun:
        """Run the compiled kernel in a fresh sandboxed worker and judge its outputs.

        `wrap` is a profiler that starts the worker as its child inside the sandbox
        (`perf record ... --`, `ncu ...`; see `run_confined`'s `tool`); `keep` leaves the
        worker's scratch (and what the wrapper wrote there) until the harness closes; `judge=False` (a profiler's re-run of a
        kernel already judged) skips comparing the outputs: rows stay `pending`.
        """
        job, out_dir = self.job_dir(comp, kf, mode, reps)
        run = self.confined(job, out_dir, wrap)
        return self.collect(run, job, out_dir, kf, keep=keep, judge=judge)

    def job_dir(self, comp: CompileResult, kf: KernelFile, mode: str, reps: int | None,
                 **extra: object) -> tuple[dict, Path]:
        self._runs += 1
        out_dir = self.root / f"run{self._runs}"
        out_dir.mkdir()
        job = self.job(comp, kf, mode, reps if reps is not None else self.bench.reps, out_dir)
        job.update(extra)
        (out_dir / "job.json").write_text(json.dumps(job))
        return job, out_dir

    def confined(self, job: dict, out_dir: Path, wrap: Sequence[str] = (),
                  timeout_s: float | None = None) -> SandboxRun:
        env = {"PYTHONPATH": os.pathsep.join(p for p in sys.path if p),
               "PYTHONDONTWRITEBYTECODE": "1", **self.backend.worker_env()}
        return run_confined(
            [sys.executable, "-m", "kernelcrew.tools.judge.worker", str(out_dir / "job.json")],
            tool=wrap,
            scratch=out_dir, readonly=[self.inputs_dir],
            timeout_s=timeout_s if timeout_s is not None else self.limits.timeout_s,
            address_space_gib=getattr(self.backend, "worker_address_space_gib",
                                      self.limits.address_space_gib),
            devices=self.backend.worker_devices() if hasattr(self.backend, "worker_devices")
            else (),
            file_size_mib=self.limits.file_size_mib, processes=self.limits.processes,
            open_files=self.limits.open_files, env=env, log_name="worker")

    def collect(self, run: SandboxRun, job: dict, out_dir: Path, kf: KernelFile, *,
                 keep: bool = False, judge: bool = True, failure: str = "",
                 checked: dict[str, set[int]] | None = None) -> KernelRun:
        """Judge what a finished worker wrote; `failure` (from the parent's handshake)
        overrides the reason the worker's exit would give; `checked` (a duel): per case
        key, the timed runs whose outputs the parent asked for."""
        events = _read_progress(out_dir / "progress.jsonl")
        done = {e["case"]: e for e in events if e.get("event") == "done"}
        finished = any(e.get("event") == "finished" for e in events)
        ok = run.returncode == 0 and finished and not failure
        reason = ""
        if failure:
            started = [e["case"] for e in events if e.get("event") == "case"]
            where = next((c for c in started if c not in done), None)
            reason = failure + (f" in case {_case_label(job, where)}"
                                if where and " in case " not in failure else "")
        elif not ok:
            started = [e["case"] for e in events if e.get("event") == "case"]
            where = next((c for c in started if c not in done), None)
            # a CPU kernel runs inside the worker and controls what it prints: quoting its
            # stderr would hand the kernel a channel to the verdict (a host file's lines)
            quote = self.backend.name != "cpu" or bool(os.environ.get("KERNELCREW_DEBUG"))
            what = run.describe(quote_stderr=quote) \
                if not (run.returncode == 0 and not finished) else \
                "worker exited without finishing"
            if not any(e.get("event") == "loaded" for e in events) and not run.timed_out:
                what += " while loading the kernel"
                if not quote:
                    what += _load_error_hint(run.stderr, kf)
            reason = f"kernel {what}" + (f" in case {_case_label(job, where)}" if where else "")
        outcome = WorkerOutcome(ok=ok, reason=reason, seconds=run.seconds, sandbox=run.sandbox)
        rows, samples, repeats = [], {}, {}
        for c, jc in zip(self.cases, job["cases"], strict=True):
            ev = done.get(jc["id"])
            if ev is None:
                rows.append(CaseRow(group=c.group, case=c.label, sizes=c.sizes, status="fail",
                                    detail=reason or "not run"))
                continue
            row = self._judge(c, ev, None if checked is None else checked[case_key(c)]) \
                if judge else CaseRow(
                group=c.group, case=c.label, sizes=c.sizes, status="pending",
                detail="not judged (a profiling re-run)")
            if ev["times_ms"]:
                t = np.asarray(ev["times_ms"])
                row.median_ms = float(np.median(t))
                row.p10_ms = float(np.percentile(t, 10))
                row.p90_ms = float(np.percentile(t, 90))
                # a CPU kernel runs inside the worker and could write this field: only the
                # CUDA runtime times back-to-back runs, a CPU timing is always one run
                if self.backend.name != "cpu":
                    row.runs_per_timing = max(1, int(ev.get("runs_per_timing", 1)))
                samples[case_key(c)] = list(map(float, t))
                repeats[case_key(c)] = row.runs_per_timing
            rows.append(row)
        if not keep:
            shutil.rmtree(out_dir, ignore_errors=True)
        return KernelRun(outcome, rows, samples, out_dir=out_dir if keep else None,
                         repeats=repeats)

    def _judge(self, c: Case, ev: dict, checked: set[int] | None = None) -> CaseRow:
        """One case's verdict from the worker's report; `checked`: the timed runs whose
        outputs the parent asked for (a duel), which the report must hold."""
        d = self.data(c)
        if checked is not None:
            missing = {r for r in checked if r < len(ev["times_ms"])} - \
                {t.get("run") for t in ev["outputs"]["timed"]}
            if missing:
                return CaseRow(group=c.group, case=c.label, sizes=c.sizes, status="fail",
                               detail=f"the worker report lacks the outputs of timed runs "
                                      f"{sorted(missing)} the parent asked for (tampered "
                                      "report?)")
        tol = self.spec.tolerance
        max_abs = max_rel = 0.0
        for k, after in enumerate(ev["input_checksums"]):
            changed = [n for n in after if after[n] != d.checksums[k][n]]
            if changed:
                return CaseRow(group=c.group, case=c.label, sizes=c.sizes, status="fail",
                               detail=f"the kernel modified its input(s) {changed}")
        checks = [(d.references[k], k, f, "first call")
                  for k, f in enumerate(ev["outputs"]["verify"])]
        for t in ev["outputs"]["timed"]:
            p = t.get("probe")
            if p is None:
                checks.append((d.references[t["set"]], t["set"], t["files"], "timed run"))
            elif 0 <= p < len(d.probes) and d.probes[p].set == t["set"]:
                checks.append((d.probes[p].reference, t["set"], t["files"],
                               "timed run with a few input elements changed in place "
                               + "(a replayed or cached result?)"))
        probed = {t.get("probe") for t in ev["outputs"]["timed"]}
        if any(len(ev["times_ms"]) > p.set and i not in probed for i, p in enumerate(d.probes)):
            return CaseRow(group=c.group, case=c.label, sizes=c.sizes, status="fail",
                           detail="the worker report lacks the probe run (tampered report?)")
        # an output equal byte for byte to one that passed against the same reference passes
        # that comparison again, with the same errors: an output of a timed run on an
        # unchanged input set is compared by bytes with the outputs that passed on that set,
        # and in full only when it differs (a threaded reduction may change the last bits)
        # (a BLAKE2b digest stands for the bytes: memory stays bounded when threaded runs
        # differ in the last bits, and a kernel cannot construct a collision)
        passed: dict[tuple[int, str], set[tuple[str, tuple, bytes]]] = {}
        for ref, k, files, when in checks:
            same_ref = ref is d.references[k]  # not a probe's reference
            for name, f in files.items():
                got = np.load(f)
                key = (got.dtype.str, got.shape, hashlib.blake2b(
                    np.ascontiguousarray(got).data, digest_size=32).digest()) if same_ref else None
                if key is not None and key in passed.get((k, name), ()):
                    continue
                cmp = compare(name, got, ref[name], tol.rtol, tol.atol)
                if not cmp.ok:
                    return CaseRow(group=c.group, case=c.label, sizes=c.sizes, status="fail",
                                   max_abs_err=_finite(cmp.max_abs_err),
                                   max_rel_err=_finite(cmp.max_rel_err),
                                   detail=f"{when}, input set {k}: {cmp.detail}",
                                   failing_indices=cmp.failing_indices, output=cmp.output,
                                   worst_index=cmp.worst_index, got=cmp.got, want=cmp.want,
                                   cause=cmp.cause)
                max_abs, max_rel = max(max_abs, cmp.max_abs_err), max(max_rel, cmp.max_rel_err)
                if key is not None:
                    passed.setdefault((k, name), set()).add(key)
        return CaseRow(group=c.group, case=c.label, sizes=c.sizes, status="pass",
                       max_abs_err=max_abs, max_rel_err=max_rel)

    @staticmethod
    def sandbox() -> str:
        return sandbox_description()


def _load_error_hint(stderr: str, kf: KernelFile) -> str:
    """Why the library did not load, from the worker's stderr, naming only identifiers
    that are in the kernel's own source (the kernel may have written that stderr: a name
    it did not already contain would be a channel out of the sandbox)."""
    m = None
    for m in re.finditer(r"undefined symbol: ([A-Za-z_][A-Za-z0-9_]{0,200})", stderr):
        pass
    if m is None:
        return ""
    symbol = m.group(1)
    names = [symbol] if re.search(rf"\b{symbol}\b", kf.text) else []
    for d in re.finditer(r"\d+", symbol):  # a C++ (mangled) name: _Z18helper_not_definedf
        n = int(d.group(0))
        name = symbol[d.end(): d.end() + n]
        if len(name) == n and re.fullmatch(r"[A-Za-z_]\w*", name) and \
                re.search(rf"\b{name}\b", kf.text):
            names.append(name)
    if symbol == kf.meta.entry and names:
        return f": the entry function {symbol!r} is not in the library (is it extern \"C\"?)"
    if names:
        return f": undefined symbol {names[0]!r} (declared but not defined?)"
    return ": an undefined symbol"


def _finite(x: float) -> float | None:
    return x if np.isfinite(x) else None


def _case_label(job: dict, cid: str) -> str:
    for c in job["cases"]:
        if c["id"] == cid:
            return f"{c['key']} ({','.join(f'{k}={v}' for k, v in c['sizes'].items())})"
    return cid


def _read_progress(path: Path) -> list[dict]:
    events = []
    try:
        for line in path.read_text().splitlines():
            try:
                events.append(json.loads(line))
            except json.JSONDecodeError:
                break  # a line cut by a crash
    except OSError:
        pass
    return events
