"""Evaluation steps the crew's graph nodes call: verify one candidate, race two kernels.

A race is the one gate (`judge.judge`), the same that `kernelcrew check` uses."""

from __future__ import annotations

from dataclasses import dataclass

from kernelcrew.kernels.kernelfile import KernelFile
from kernelcrew.results import CaseRow, CompileResult
from kernelcrew.tools.judge.gate import GateDecision
from kernelcrew.tools.judge.harness import Harness, KernelRun
from kernelcrew.tools.judge.judge import IncumbentFailed, judge

__all__ = ["IncumbentFailed", "Race", "race", "verify"]


@dataclass
class Race:
    """Two kernels timed side by side in alternating rounds, and the gate's decision."""

    rows: list[CaseRow]  # the challenger's rows, speedup = incumbent / challenger
    gate: GateDecision
    challenger: KernelRun
    incumbent: KernelRun
    failure: str = ""  # set when the challenger was rejected (the reason)
    integrity: bool = False  # the rejection is the judge's own check of the worker
    suspicious: bool = False  # faster than the roofline allows: quarantined


def verify(h: Harness, comp: CompileResult, kf: KernelFile) -> KernelRun:
    """Correctness on every shape group (the first call of every input set, no timing)."""
    return h.run(comp, kf, mode="verify", reps=0)


def race(h: Harness, challenger: tuple[CompileResult, KernelFile],
         incumbent: tuple[CompileResult, KernelFile], *, rounds: int | None = None,
         against: str = "the baseline", min_speedup: float | None = None) -> Race:
    """Time the challenger against the incumbent and gate (see `judge.judge`). A
    challenger that fails anything is `rejected`; an incumbent that fails raises
    IncumbentFailed."""
    j = judge(h, challenger, incumbent, against=against, min_speedup=min_speedup,
              rounds=rounds)
    return Race(j.rows, j.gate, j.challenger, j.incumbent, failure=j.failure,
                integrity=j.integrity, suspicious=j.suspicious)
