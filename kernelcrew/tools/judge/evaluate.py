"""Evaluation steps the crew's graph nodes call: verify one candidate, race two kernels."""

from __future__ import annotations

from dataclasses import dataclass

from kernelcrew.kernels.kernelfile import KernelFile
from kernelcrew.results import CaseRow, CompileResult
from kernelcrew.tools.judge.check import compare_rows, merge_runs
from kernelcrew.tools.judge.gate import GateDecision, decide, weighted_speedup
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


def race(h: Harness, challenger: tuple[CompileResult, KernelFile],
         incumbent: tuple[CompileResult, KernelFile], *, rounds: int | None = None,
         against: str = "the baseline") -> Race:
    rounds = rounds or h.bench.rounds
    reps = max(3, h.bench.reps // rounds)
    cr, ir = [], []
    with bench_lock():
        for rnd in range(rounds):
            # alternate who goes first, so neither kernel always runs on a cold machine
            for who in (("c", "i") if rnd % 2 == 0 else ("i", "c")):
                if who == "c":
                    c = h.run(*challenger, reps=reps)
                    if not c.correct:  # timed outputs are checked again
                        gate = GateDecision("rejected", 0.0, 0.0, {}, c.first_failure())
                        return Race(c.rows, gate, c, c, failure=c.first_failure())
                    cr.append(c)
                else:
                    i = h.run(*incumbent, reps=reps)
                    if not i.correct:
                        raise IncumbentFailed(i.first_failure())
                    ir.append(i)
    c, i = merge_runs(cr), merge_runs(ir)
    rows = compare_rows(c, i, h)
    weights = {g: s.weight for g, s in h.spec.shapes.items()}
    per_round = [weighted_speedup(compare_rows(a, b, h), weights)[0]
                 for a, b in zip(cr, ir, strict=True)]
    gate = decide(rows, i.samples, c.samples, weights, h.bench.min_speedup, against=against,
                  round_speedups=per_round)
    return Race(rows, gate, c, i)
