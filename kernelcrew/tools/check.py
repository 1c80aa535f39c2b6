"""`kernelcrew check`: is this kernel correct, and is it faster than the op's baseline?"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from filelock import FileLock

from kernelcrew.errors import InputError, PolicyViolation
from kernelcrew.kernels.kernelfile import KernelFile, load_kernel, validate_against
from kernelcrew.kernels.spec import OpSpec, load_op
from kernelcrew.tools.backend import Backend, get_backend
from kernelcrew.tools.config import BenchSettings, Limits, cache_dir
from kernelcrew.tools.gate import decide
from kernelcrew.tools.harness import Harness, KernelRun, case_key
from kernelcrew.tools.results import CaseRow, CheckResult, CompileResult

Progress = Callable[[str], None]


def bench_lock() -> FileLock:
    """Benchmarks never run in parallel with each other, across processes too."""
    return FileLock(str(cache_dir() / "bench.lock"))


def load_candidate(path: str | Path | KernelFile, spec: OpSpec, backend: str) -> KernelFile:
    """Load a kernel file; a policy violation in it is re-raised for a `rejected` verdict."""
    kf = path if isinstance(path, KernelFile) else load_kernel(path)
    if kf.backend != backend:
        raise InputError(f"is a {kf.backend} kernel file but the backend is {backend}; "
                         f"pass --backend {kf.backend}", path=kf.path)
    validate_against(kf, spec)
    return kf


def merge_runs(runs: list[KernelRun]) -> KernelRun:
    """Pool the timing samples of several rounds of one kernel (all must be correct)."""
    first = runs[0]
    samples: dict[str, list[float]] = {}
    for r in runs:
        for k, v in r.samples.items():
            samples.setdefault(k, []).extend(v)
    return KernelRun(first.outcome, first.rows, samples)


def compare_rows(cand: KernelRun, base: KernelRun, harness: Harness) -> list[CaseRow]:
    import numpy as np

    rows = []
    for c, row in zip(harness.cases, cand.rows, strict=True):
        k = case_key(c)
        cs, bs = cand.samples.get(k), base.samples.get(k)
        row = row.model_copy()
        if cs and bs:
            row.median_ms = float(np.median(cs))
            row.p10_ms = float(np.percentile(cs, 10))
            row.p90_ms = float(np.percentile(cs, 90))
            row.baseline_ms = float(np.median(bs))
            row.speedup = row.baseline_ms / row.median_ms if row.median_ms > 0 else None
        rows.append(row)
    return rows


def check(op: str | Path | OpSpec, kernel: str | Path | KernelFile, backend: str = "cpu", *,
          seed: int | None = None, limits: Limits | None = None,
          bench: BenchSettings | None = None, progress: Progress | None = None) -> CheckResult:
    """Compile, verify on every shape group, time against the baseline, and gate."""
    say = progress or (lambda _msg: None)
    spec = load_op(op)
    be = get_backend(backend)
    bench = bench or BenchSettings()
    name = str(kernel.path if isinstance(kernel, KernelFile) else kernel)

    def rejected(reason: str, comp: CompileResult | None = None, rows=None) -> CheckResult:
        return CheckResult(op=spec.name, kernel=name, backend=be.name, correct=False,
                           verdict="rejected", speedup=None, reason=reason, compile=comp,
                           rows=rows or [], sandbox=Harness.sandbox())

    try:
        kf = load_candidate(kernel, spec, be.name)
    except PolicyViolation as e:
        return rejected(f"refused: {e}")
    base_kf = load_kernel(spec.baseline_path(be.name))
    validate_against(base_kf, spec)
    say(f"compiling {Path(name).name} ({be.name})")
    comp = be.compile(kf, spec)
    if not comp.ok:
        return rejected(comp.reason + (f": {comp.messages[0].message}" if comp.messages else ""),
                        comp)
    base_comp = be.compile(base_kf, spec)
    if not base_comp.ok:
        raise InputError(f"the op's own baseline does not compile: {base_comp.reason}: "
                         f"{base_comp.log.splitlines()[-1] if base_comp.log else ''}",
                         path=base_kf.path)
    runnable, why = be.can_run()
    if not runnable:
        rows = [CaseRow(group=c.group, case=c.label, sizes=c.sizes, status="pending",
                        detail="compiled only") for c in spec.cases()]
        return CheckResult(op=spec.name, kernel=name, backend=be.name, correct=None,
                           verdict="same", speedup=None, ran=False, compile=comp, rows=rows,
                           reason=f"compiled only, not run: {why}; correctness and timing are "
                                  "pending", sandbox=Harness.sandbox())
    limits = limits or Limits()
    with Harness(spec, be, seed=seed, limits=limits, bench=bench) as h:
        say("making inputs and float64 references")
        for c in h.cases:  # a broken reference is bad input: fail before any kernel runs
            h.data(c)
        reps = max(3, bench.reps // bench.rounds)
        cand_runs, base_runs = [], []
        with bench_lock():
            for rnd in range(bench.rounds):
                say(f"round {rnd + 1}/{bench.rounds}: candidate ({len(h.cases)} cases x {reps} runs)")
                cr = h.run(comp, kf, reps=reps)
                if not cr.correct:
                    return rejected(cr.first_failure(), comp, cr.rows)
                cand_runs.append(cr)
                say(f"round {rnd + 1}/{bench.rounds}: baseline")
                br = h.run(base_comp, base_kf, reps=reps)
                if not br.correct:
                    raise InputError(f"the op's own baseline fails: {br.first_failure()}",
                                     path=base_kf.path)
                base_runs.append(br)
        cand, base = merge_runs(cand_runs), merge_runs(base_runs)
        rows = compare_rows(cand, base, h)
        weights = {g: s.weight for g, s in spec.shapes.items()}
        gate = decide(rows, base.samples, cand.samples, weights, bench.min_speedup)
        return CheckResult(op=spec.name, kernel=name, backend=be.name, correct=True,
                           verdict=gate.verdict, speedup=gate.speedup, reason=gate.reason,
                           noise_band=gate.band, rows=rows, compile=comp,
                           group_speedups=gate.group_speedups, sandbox=Harness.sandbox())
