"""Evaluation steps the crew's graph nodes call: verify one candidate, race two kernels."""

from __future__ import annotations

from dataclasses import dataclass

from kernelcrew.kernels.kernelfile import KernelFile
from kernelcrew.results import CaseRow, CompileResult
from kernelcrew.tools.judge.check import judge_duel
from kernelcrew.tools.judge.duel import Duel, crosschecked_duel, pooled
from kernelcrew.tools.judge.gate import GateDecision
from kernelcrew.tools.judge.harness import Harness, KernelRun
from kernelcrew.tools.locks import bench_lock


class IncumbentFailed(RuntimeError):
    """The incumbent of a race (the best so far) failed a re-check of its outputs."""

    def __init__(self, reason: str) -> None:
        super().__init__(f"the incumbent kernel failed a re-check: {reason}")
        self.reason = reason


@dataclass
class Race:
    """Two correct kernels timed side by side in alternating rounds."""

    rows: list[CaseRow]  # the challenger's rows, speedup = incumbent / challenger
    gate: GateDecision
    challenger: KernelRun
    incumbent: KernelRun
    failure: str = ""  # set when the challenger failed its timed-output checks


def verify(h: Harness, comp: CompileResult, kf: KernelFile) -> KernelRun:
    """Correctness on every shape group (one call per input set, no timing)."""
    return h.run(comp, kf, mode="verify", reps=0)


def _duel(h: Harness, challenger: tuple[CompileResult, KernelFile],
          incumbent: tuple[CompileResult, KernelFile], rounds: int | None
          ) -> tuple[Duel, Race | None]:
    """One duel held to the parent's clock, and the rejection when the challenger failed
    or was contradicted by that clock (None: both kernels were correct and timed)."""
    with bench_lock():  # a report the parent's clock contradicts is timed once more
        d, forged = crosschecked_duel(h, challenger, incumbent, reps=h.bench.reps,
                                      rounds=rounds or h.bench.rounds)
    if d.failed != "b" and not d.a.correct:  # timed outputs are checked again
        why = d.a.first_failure()
        return d, Race(d.a.rows, GateDecision("rejected", 0.0, 0.0, {}, why), d.a, d.a,
                       failure=why)
    if not d.b.correct:
        raise IncumbentFailed(d.b.first_failure())
    if forged:
        return d, Race(d.a.rows, GateDecision("rejected", 0.0, 0.0, {}, forged), d.a, d.a,
                       failure=forged)
    return d, None


def race(h: Harness, challenger: tuple[CompileResult, KernelFile],
         incumbent: tuple[CompileResult, KernelFile], *, rounds: int | None = None,
         against: str = "the baseline", min_speedup: float | None = None) -> Race:
    """Time the challenger against the incumbent in alternating rounds (a duel) and gate.

    A challenger that fails (a wrong timed output, a crash, a timeout) or whose reported
    times the parent's clock contradicts is `rejected`; an incumbent that fails a
    re-check raises RuntimeError. A challenger faster overall whose only fault is a
    group that regressed is timed in a second duel and judged on both duels' rounds: a
    group of short cases can swing on one duel, and twice the rounds narrow its noise."""
    d, rejected = _duel(h, challenger, incumbent, rounds)
    if rejected:
        return rejected
    floor = h.bench.min_speedup if min_speedup is None else min_speedup
    rows, gate = judge_duel(h, d, floor, against=against)
    if gate.verdict == "same" and gate.speedup >= 1 + gate.band and \
            min(gate.group_speedups.values(), default=1.0) < 1:
        again, rejected = _duel(h, challenger, incumbent, rounds)
        if rejected:
            return rejected
        d = pooled(d, again)
        rows, gate = judge_duel(h, d, floor, against=against)
        gate = GateDecision(**{**gate.__dict__, "reason": gate.reason + (
            f" (a group regressed in the first duel: judged on two duels, {d.rounds} rounds)")})
    return Race(rows, gate, d.a, d.b)
