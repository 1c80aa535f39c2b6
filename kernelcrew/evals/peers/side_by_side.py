"""Kernels of one operator timed side by side in one harness: the baseline, the compiler
alone (the baseline's own source at -O3 -march=native, plus -fopenmp where it already has
OpenMP pragmas), the hand-written fast kernel, Kernel Tuner's optimum and the crew's best.

Every kernel is first verified on every shape group, then all of them are timed on the
typical cases in alternating rounds (the order rotates every round), each run in a fresh
sandboxed worker, under the machine-wide benchmark lock, as `kernelcrew check` does for two.
"""

from __future__ import annotations

import re
import statistics
from dataclasses import dataclass, field
from pathlib import Path

from kernelcrew.kernels.formats import format_for
from kernelcrew.kernels.kernelfile import KernelFile, load_kernel
from kernelcrew.kernels.spec import OpSpec, load_op
from kernelcrew.tools.backends.backend import Backend, get_backend
from kernelcrew.tools.config import BenchSettings
from kernelcrew.tools.judge.harness import Harness, case_key
from kernelcrew.tools.locks import bench_lock

ROOT = Path(__file__).resolve().parents[3]
FAST_DIR = ROOT / "tests" / "kernels"  # the hand-written fast kernels (test fixtures)
COMPILER_ALONE_FLAGS = ("-O3", "-march=native")
_OMP_PRAGMA = re.compile(r"^\s*#\s*pragma\s+omp\b", re.MULTILINE)


def has_openmp_pragmas(kf: KernelFile) -> bool:
    return bool(_OMP_PRAGMA.search(kf.body))


def compiler_alone(kf: KernelFile) -> KernelFile:
    """The same source with the compiler doing all the work: -O3 -march=native, and
    -fopenmp where the source already asks for threads."""
    flags = list(COMPILER_ALONE_FLAGS) + (["-fopenmp"] if has_openmp_pragmas(kf) else [])
    return kf.with_changes(flags=flags)


def fast_kernel_path(op: str, backend: str = "cpu") -> Path | None:
    p = FAST_DIR / op / f"fast{format_for(backend).suffix}"
    return p if p.exists() else None


@dataclass
class Timed:
    """One kernel's result: correctness on every group, medians on the typical cases."""

    label: str
    correct: bool = False
    case_ms: dict[str, float] = field(default_factory=dict)  # case label -> median ms
    typical_ms: float | None = None  # the sum over the typical cases
    error: str = ""


def time_side_by_side(op: str | Path | OpSpec, kernels: dict[str, KernelFile], *,
                      reps: int = 10, rounds: int = 3, seed: int = 0,
                      backend: str = "cpu",
                      compilers: dict[str, Backend] | None = None) -> dict[str, Timed]:
    """Verify every kernel on every group, then time the correct ones on the typical cases
    in `rounds` alternating rounds of `reps // rounds` (at least 3) runs each. `compilers`
    builds the kernels of some labels with another compiler (peers/compilers.py)."""
    spec = load_op(op)
    be = get_backend(backend)
    out = {label: Timed(label) for label in kernels}
    comps = {}
    for label, kf in kernels.items():
        comp = (compilers or {}).get(label, be).compile(kf, spec)
        if not comp.ok:
            out[label].error = f"compile failed: {comp.reason}"
            continue
        comps[label] = comp
    with Harness(spec, be, seed=seed, bench=BenchSettings(reps=reps)) as h:
        for label, comp in comps.items():
            run = h.run(comp, kernels[label], mode="verify", reps=0)
            if run.correct:
                out[label].correct = True
            else:
                out[label].error = run.first_failure()[:300]
    typical = [c for c in spec.cases() if c.group == "typical"]
    samples: dict[str, dict[str, list[float]]] = {k: {} for k in kernels}
    order = [k for k in kernels if out[k].correct]
    with Harness(spec, be, seed=seed, bench=BenchSettings(reps=reps), cases=typical) as h, \
            bench_lock():
        for rnd in range(rounds):
            turn = order[rnd % len(order):] + order[:rnd % len(order)] if order else []
            for label in turn:
                run = h.run(comps[label], kernels[label], reps=max(3, reps // rounds))
                if not run.correct:  # the timed outputs are checked again
                    out[label].correct = False
                    out[label].error = f"failed a timed run: {run.first_failure()[:300]}"
                    order.remove(label)
                    continue
                for c in typical:
                    samples[label].setdefault(c.label, []).extend(
                        run.samples.get(case_key(c), []))
    for label in order:
        t = out[label]
        t.case_ms = {c: statistics.median(s) for c, s in samples[label].items() if s}
        if len(t.case_ms) == len(typical):
            t.typical_ms = sum(t.case_ms.values())
    return out


def load_if(path: str | Path | None) -> KernelFile | None:
    return load_kernel(path) if path and Path(path).exists() else None
