"""`kernelcrew check`: is this kernel correct, and is it faster than the op's baseline?"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from kernelcrew.errors import InputError, PolicyViolation
from kernelcrew.kernels.kernelfile import KernelFile, load_kernel, validate_against
from kernelcrew.kernels.spec import OpSpec, load_op
from kernelcrew.results import CaseRow, CheckResult, CompileResult
from kernelcrew.tools.backends.backend import get_backend
from kernelcrew.tools.config import BenchSettings, Limits
from kernelcrew.tools.judge.harness import Harness
from kernelcrew.tools.judge.judge import IncumbentFailed, judge

Progress = Callable[[str], None]


def load_candidate(path: str | Path | KernelFile, spec: OpSpec, backend: str) -> KernelFile:
    """Load a kernel file; a policy violation in it is re-raised for a `rejected` verdict."""
    kf = path if isinstance(path, KernelFile) else load_kernel(path)
    if kf.backend != backend:
        raise InputError(f"is a {kf.backend} kernel file but the backend is {backend}; "
                         f"pass --backend {kf.backend}", path=kf.path)
    validate_against(kf, spec)
    return kf


def check(op: str | Path | OpSpec, kernel: str | Path | KernelFile, backend: str = "cpu", *,
          seed: int | None = None, limits: Limits | None = None,
          bench: BenchSettings | None = None, progress: Progress | None = None) -> CheckResult:
    """Compile, verify on every shape group, time against the baseline, and gate."""
    say = progress or (lambda _msg: None)
    be = get_backend(backend)
    spec = load_op(op, be.name)
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
        say(f"timing: {len(h.cases)} cases x {bench.reps} runs per kernel, in "
            f"{min(bench.rounds, bench.reps)} alternating rounds (candidate and baseline)")
        try:
            j = judge(h, (comp, kf), (base_comp, base_kf), min_speedup=bench.min_speedup)
        except IncumbentFailed as e:
            raise InputError(f"the op's own baseline fails: {e.reason}",
                             path=base_kf.path) from None
        if j.failure:
            return rejected(j.failure, comp, j.rows)
        g = j.gate
        return CheckResult(op=spec.name, kernel=name, backend=be.name, correct=True,
                           verdict=g.verdict, speedup=g.speedup, reason=g.reason,
                           noise_band=g.band, measured_noise=g.measured_noise,
                           min_speedup=g.min_speedup, rounds=g.rounds, cache=j.cache or {},
                           rows=j.rows, compile=comp, group_speedups=g.group_speedups,
                           sandbox=Harness.sandbox(), suspicious=j.suspicious)
