"""The parent side of every kernel run: inputs, references, workers, judgment.

The parent makes the inputs, computes the float64 reference itself, starts one
sandboxed worker per kernel run, and judges what the worker wrote. Nothing the
kernel says about itself is trusted.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import sys
import uuid
import zlib
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from kernelcrew.errors import InputError
from kernelcrew.kernels.kernelfile import KernelFile
from kernelcrew.kernels.spec import DTYPES, Case, OpSpec
from kernelcrew.tools.backend import Backend
from kernelcrew.tools.config import BenchSettings, Limits, scratch_root
from kernelcrew.tools.results import CaseRow, CompileResult, WorkerOutcome
from kernelcrew.tools.sandbox import run_confined, sandbox_description
from kernelcrew.tools.verify import compare
from kernelcrew.tools.worker import checksum


@dataclass
class CaseData:
    case: Case
    input_files: list[dict[str, str]]  # per input set: name -> .npy
    checksums: list[dict[str, str]]
    references: list[dict[str, np.ndarray]]


@dataclass
class KernelRun:
    """One worker's run of one kernel over the cases, judged."""

    outcome: WorkerOutcome
    rows: list[CaseRow]
    samples: dict[str, list[float]] = field(default_factory=dict)  # case key -> ms

    @property
    def correct(self) -> bool:
        return self.outcome.ok and all(r.status == "pass" for r in self.rows)

    def first_failure(self) -> str:
        if not self.outcome.ok:
            return self.outcome.reason
        for r in self.rows:
            if r.status == "fail":
                return f"wrong result in {r.group} case {r.case}: {r.detail}"
        return ""


def case_key(c: Case) -> str:
    return f"{c.group}[{c.index}]"


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

    def __enter__(self) -> Harness:
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
        files, sums, refs = [], [], []
        for k in range(self.bench.input_sets):
            rng = np.random.default_rng([self.seed, case.index, zlib.crc32(case.group.encode()), k])
            if make:
                try:
                    arrays = make(rng, **case.sizes)
                except Exception as e:  # user code from the op folder
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
                    a = rng.integers(-8, 9, size=shape).astype(dt)
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
        return CaseData(case, files, sums, refs)

    def _reference(self, case: Case, ins: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        spec = self.spec
        kw = {n: (a.astype(np.float64) if a.dtype.kind == "f" else a) for n, a in ins.items()}
        kw.update({n: s.value for n, s in spec.scalars.items()})
        kw.update(case.sizes)
        path = spec.folder / "reference.py"
        try:
            out = spec.reference_fn()(**kw)
        except InputError:
            raise
        except Exception as e:  # user code from the op folder
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
                "outputs": {n: {"shape": list(spec.shape(n, c.sizes)), "dtype": t.dtype}
                            for n, t in spec.outputs.items()},
            })
        return {
            "backend": self.backend.name, "artifact": comp.artifact, "entry": kf.meta.entry,
            "launch": [x.model_dump() for x in kf.meta.launch],
            "temps": {n: t.model_dump() for n, t in kf.meta.temps.items()},
            "knobs": kf.meta.knobs, "signature": sig, "cases": cases, "mode": mode,
            "reps": reps, "warmup": self.bench.warmup, "out_dir": str(out_dir),
        }

    def run(self, comp: CompileResult, kf: KernelFile, *, mode: str = "bench",
            reps: int | None = None) -> KernelRun:
        """Run the compiled kernel in a fresh sandboxed worker and judge its outputs."""
        self._runs += 1
        out_dir = self.root / f"run{self._runs}"
        out_dir.mkdir()
        job = self.job(comp, kf, mode, reps if reps is not None else self.bench.reps, out_dir)
        job_path = out_dir / "job.json"
        job_path.write_text(json.dumps(job))
        env = {"PYTHONPATH": os.pathsep.join(p for p in sys.path if p),
               "PYTHONDONTWRITEBYTECODE": "1", **self.backend.worker_env()}
        run = run_confined(
            [sys.executable, "-m", "kernelcrew.tools.worker", str(job_path)],
            scratch=out_dir, readonly=[self.inputs_dir], timeout_s=self.limits.timeout_s,
            address_space_gib=self.limits.address_space_gib,
            file_size_mib=self.limits.file_size_mib, processes=self.limits.processes,
            open_files=self.limits.open_files, env=env, log_name="worker")
        events = _read_progress(out_dir / "progress.jsonl")
        done = {e["case"]: e for e in events if e.get("event") == "done"}
        finished = any(e.get("event") == "finished" for e in events)
        ok = run.returncode == 0 and finished
        reason = ""
        if not ok:
            started = [e["case"] for e in events if e.get("event") == "case"]
            where = next((c for c in started if c not in done), None)
            what = run.describe() if not (run.returncode == 0 and not finished) else \
                "worker exited without finishing"
            if not any(e.get("event") == "loaded" for e in events) and not run.timed_out:
                what += " while loading the kernel"
            reason = f"kernel {what}" + (f" in case {_case_label(job, where)}" if where else "")
        outcome = WorkerOutcome(ok=ok, reason=reason, seconds=run.seconds, sandbox=run.sandbox)
        rows, samples = [], {}
        for c, jc in zip(self.cases, job["cases"], strict=True):
            ev = done.get(jc["id"])
            if ev is None:
                rows.append(CaseRow(group=c.group, case=c.label, sizes=c.sizes, status="fail",
                                    detail=reason or "not run"))
                continue
            row = self._judge(c, ev)
            if ev["times_ms"]:
                t = np.asarray(ev["times_ms"])
                row.median_ms = float(np.median(t))
                row.p10_ms = float(np.percentile(t, 10))
                row.p90_ms = float(np.percentile(t, 90))
                samples[case_key(c)] = list(map(float, t))
            rows.append(row)
        shutil.rmtree(out_dir, ignore_errors=True)
        return KernelRun(outcome, rows, samples)

    def _judge(self, c: Case, ev: dict) -> CaseRow:
        d = self.data(c)
        tol = self.spec.tolerance
        max_abs = max_rel = 0.0
        for k, after in enumerate(ev["input_checksums"]):
            changed = [n for n in after if after[n] != d.checksums[k][n]]
            if changed:
                return CaseRow(group=c.group, case=c.label, sizes=c.sizes, status="fail",
                               detail=f"the kernel modified its input(s) {changed}")
        checks = [(k, f, "first call") for k, f in enumerate(ev["outputs"]["verify"])]
        checks += [(t["set"], t["files"], "timed run") for t in ev["outputs"]["timed"]]
        for k, files, when in checks:
            for name, f in files.items():
                got = np.load(f)
                cmp = compare(name, got, d.references[k][name], tol.rtol, tol.atol)
                if not cmp.ok:
                    return CaseRow(group=c.group, case=c.label, sizes=c.sizes, status="fail",
                                   max_abs_err=_finite(cmp.max_abs_err),
                                   max_rel_err=_finite(cmp.max_rel_err),
                                   detail=f"{when}, input set {k}: {cmp.detail}",
                                   failing_indices=cmp.failing_indices)
                max_abs, max_rel = max(max_abs, cmp.max_abs_err), max(max_rel, cmp.max_rel_err)
        return CaseRow(group=c.group, case=c.label, sizes=c.sizes, status="pass",
                       max_abs_err=max_abs, max_rel_err=max_rel)

    @staticmethod
    def sandbox() -> str:
        return sandbox_description()


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
