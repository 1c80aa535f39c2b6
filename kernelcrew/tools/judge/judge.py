"""The one gate: every path that can accept a win goes through `judge`.

`kernelcrew check` (a kernel against the op's baseline), the crew's races (a candidate
against the best so far) and its final race, `eval` and `bench` (through the crew) all
call `judge`. It:
1. races the two kernels side by side (`duel`): every call's outputs checked by the
   parent, every time the parent's own;
2. rejects a challenger that failed anything (a wrong output, a crash, a timeout, the
   judge's own checks of its worker), naming the cause;
3. gates the speedup (`gate.decide`): beyond the measured noise and the threshold, no
   group regressing beyond the incumbent's own noise; a challenger whose only fault is a
   regressed group is raced once more and judged on both duels;
4. for a `faster` verdict only, the checks that decide whether a win is accepted:
   - the confinement: a CPU worker that could reach the parent's process (no PID
     namespace and no Landlock, see `sandbox.parent_unreachable`) cannot be believed;
   - the roofline: a case faster than the machine's peaks allow (DRAM bandwidth, or the
     cache's when the case fits in it, and the FLOP rate) is quarantined;
   - unseen inputs: the challenger is verified on sizes the op does not list and on
     values beyond the standard normal (`unseen`), where the op's baseline gives the
     reference's answer.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from kernelcrew.kernels.kernelfile import KernelFile
from kernelcrew.kernels.spec import OpSpec
from kernelcrew.results import CaseRow, CompileResult
from kernelcrew.tools.backends.backend import Backend
from kernelcrew.tools.judge.duel import Duel, duel, pooled
from kernelcrew.tools.judge.gate import (
    GateDecision,
    bootstrap_noise,
    decide,
    load_outliers,
    own_noise,
    tail_mean,
)
from kernelcrew.tools.judge.harness import Harness, KernelRun, case_key
from kernelcrew.tools.locks import bench_lock
from kernelcrew.tools.sandbox import parent_unreachable

Kernel = tuple[CompileResult, KernelFile]


class IncumbentFailed(RuntimeError):
    """The incumbent of a race (the baseline or the best so far) failed a check."""

    def __init__(self, reason: str) -> None:
        super().__init__(f"the incumbent kernel failed a re-check: {reason}")
        self.reason = reason


@dataclass
class Judgment:
    """The verdict on a challenger against an incumbent, and what it rests on."""

    gate: GateDecision  # its verdict is the verdict (rejected when the challenger failed)
    rows: list[CaseRow]  # the challenger's rows, speedup = incumbent / challenger
    challenger: KernelRun
    incumbent: KernelRun
    failure: str = ""  # why the challenger was rejected ("" when it was not)
    integrity: bool = False  # the rejection is the judge's own check of the worker
    suspicious: bool = False  # faster than the roofline allows: quarantined
    cache: dict[str, str] | None = None  # case key -> cold | warm

    @property
    def verdict(self) -> str:
        return self.gate.verdict

    @property
    def correct(self) -> bool:
        return not self.failure


def judge(h: Harness, challenger: Kernel, incumbent: Kernel, *, against: str = "the baseline",
          min_speedup: float | None = None, rounds: int | None = None,
          reps: int | None = None, unseen: bool = True) -> Judgment:
    """The verdict on `challenger` against `incumbent` (see the module text). Raises
    IncumbentFailed when the incumbent fails."""
    floor = h.bench.min_speedup if min_speedup is None else min_speedup
    d, rejected = _duel(h, challenger, incumbent, rounds, reps)
    if rejected is not None:
        return rejected
    rows, gate = judge_duel(h, d, floor, against=against)
    if gate.verdict == "same" and gate.speedup >= 1 + gate.band and \
            min(gate.group_speedups.values(), default=1.0) < 1:
        again, rejected = _duel(h, challenger, incumbent, rounds, reps)
        if rejected is not None:
            return rejected
        d = pooled(d, again)
        rows, gate = judge_duel(h, d, floor, against=against)
        gate = _noted(gate, f" (a group regressed in the first duel: judged on two duels, "
                            f"{d.rounds} rounds)")
    j = Judgment(gate, rows, d.a, d.b, cache={case_key(c): h.cache_state(c) for c in h.cases})
    if gate.verdict != "faster":
        return j
    why = parent_unreachable() if h.backend.untrusted_host else ""
    if why:
        return _demoted(j, f"not accepted: {why}")
    why = roofline_finding(rows, h.spec, h.backend, h.bench.input_sets)
    if why:
        return _demoted(j, why, suspicious=True)
    if unseen:
        from kernelcrew.tools.judge.unseen import unseen_failure

        why, row = unseen_failure(h, challenger, incumbent=_baseline(h))
        if why:
            j.failure = why
            if row is not None:
                j.rows = [*j.rows, row]
            j.gate = GateDecision("rejected", gate.speedup, gate.band, gate.group_speedups, why,
                                  gate.measured_noise, gate.min_speedup, gate.rounds)
    return j


def _baseline(h: Harness) -> Kernel | None:
    """The op's own baseline (the arbiter of which unseen inputs the op defines)."""
    from kernelcrew.kernels.kernelfile import load_kernel

    try:
        kf = load_kernel(h.spec.baseline_path(h.backend.name))
    except Exception:  # noqa: BLE001 - no baseline for this backend: no arbiter
        return None
    comp = h.backend.compile(kf, h.spec)
    return (comp, kf) if comp.ok else None


def _duel(h: Harness, challenger: Kernel, incumbent: Kernel, rounds: int | None,
          reps: int | None) -> tuple[Duel, Judgment | None]:
    with bench_lock():
        d = duel(h, challenger, incumbent, reps=reps or h.bench.reps,
                 rounds=rounds or h.bench.rounds)
    if d.failed != "b" and not d.a.correct:
        why = d.a.first_failure()
        gate = GateDecision("rejected", 0.0, 0.0, {}, why)
        return d, Judgment(gate, d.a.rows, d.a, d.b, failure=why, integrity=d.integrity == "a")
    if not d.b.correct:
        raise IncumbentFailed(d.b.first_failure())
    return d, None


def _noted(gate: GateDecision, note: str) -> GateDecision:
    return GateDecision(**{**gate.__dict__, "reason": gate.reason + note})


def _demoted(j: Judgment, why: str, *, suspicious: bool = False) -> Judgment:
    """A `faster` verdict not accepted: `same`, with the finding and what the gate said."""
    g = j.gate
    j.gate = GateDecision("same", g.speedup, g.band, g.group_speedups,
                          f"{why} (gate said: {g.reason})", g.measured_noise, g.min_speedup,
                          g.rounds)
    j.suspicious = suspicious
    return j


JITTER_FLOOR = 1.5  # the timing floor is at least this many times a call of nothing's jitter
JITTER_CAP = 4.0  # ... and at most this many times the backend's floor (a burst of load
# while the calls of nothing were timed must not blind the judge to real speedups)


def timing_floor(h: Harness, *runs: KernelRun) -> float:
    """The least median a speedup is taken from: the backend's floor, or more where this
    machine's round trip to a worker jitters more (measured by the parent, on calls of
    nothing, before either kernel was loaded: a kernel cannot raise it)."""
    base = h.backend.timing_floor_ms
    return max([base, *(min(JITTER_FLOOR * r.jitter_ms, JITTER_CAP * base) for r in runs)])


def compare_rows(cand: KernelRun, base: KernelRun, h: Harness) -> list[CaseRow]:
    """Per-case medians and speedups; medians under the timing floor are clamped."""
    import numpy as np

    floor = timing_floor(h, cand, base)
    rows = []
    for c, row in zip(h.cases, cand.rows, strict=True):
        k = case_key(c)
        cs, bs = cand.samples.get(k), base.samples.get(k)
        row = row.model_copy()
        if cs and bs:
            row.median_ms = float(np.median(cs))
            row.p10_ms = float(np.percentile(cs, 10))
            row.p90_ms = float(np.percentile(cs, 90))
            row.baseline_ms = float(np.median(bs))
            row.speedup = max(row.baseline_ms, floor) / max(row.median_ms, floor)
        rows.append(row)
    return rows


def judge_duel(h: Harness, d: Duel, min_speedup: float, *, challenger: str = "a",
               against: str = "the baseline") -> tuple[list[CaseRow], GateDecision]:
    """Rows (challenger vs the other kernel) and the gate's decision for a finished duel
    in which both kernels were correct. Rounds during which the machine was much busier
    than in the others are left out (gate.load_outliers); the measured noise is the
    bootstrap interval of the overall speedup over the rounds kept (gate.bootstrap_noise);
    a group regresses beyond the band or beyond the incumbent's own noise in that group
    (gate.own_noise), never beyond a noise the challenger's runs made."""
    other = "b" if challenger == "a" else "a"
    drop = load_outliers(d.busy)
    keep = [r for r in range(d.rounds) if r not in drop]
    cr, orr = d.round_samples(challenger), d.round_samples(other)
    crun, orun = (d.a, d.b) if challenger == "a" else (d.b, d.a)

    def kept(run: KernelRun, per_round: list[dict[str, list[float]]]) -> KernelRun:
        samples: dict[str, list[float]] = {}
        for r in keep:
            for k, v in per_round[r].items():
                samples.setdefault(k, []).extend(v)
        return KernelRun(run.outcome, run.rows, samples, jitter_ms=run.jitter_ms)

    weights = {g: s.weight for g, s in h.spec.shapes.items()}
    floor = timing_floor(h, d.a, d.b)
    rows = compare_rows(kept(crun, cr), kept(orun, orr), h)
    per_case = {case_key(c): (c.group, [cr[r].get(case_key(c), []) for r in keep],
                              [orr[r].get(case_key(c), []) for r in keep]) for c in h.cases}
    timed = {k: v for k, v in per_case.items() if all(v[1]) and all(v[2])}
    noise = bootstrap_noise(timed, weights, floor)
    group_noise = {g: own_noise({k: v[2] for k, v in timed.items() if v[0] == g}, floor)
                   for g in {v[0] for v in timed.values()}}
    gate = decide(rows, weights, min_speedup, against=against, noise=noise, rounds=len(keep),
                  group_noise=group_noise, group_tail=_group_tails(timed, floor))
    if drop:
        gate = _noted(gate, f" ({len(drop)} round(s) left out: the machine was busier then)")
    return rows, gate


def _group_tails(timed: dict[str, tuple[str, list[list[float]], list[list[float]]]],
                 floor: float) -> dict[str, tuple[float, float | None]]:
    """Per group: the geometric mean over its cases of the incumbent's tail mean over the
    challenger's (`gate.tail_mean`), and the incumbent's own noise in it."""
    logs: dict[str, list[float]] = {}
    for group, cand, base in timed.values():
        c = tail_mean([t for r in cand for t in r], floor)
        b = tail_mean([t for r in base for t in r], floor)
        logs.setdefault(group, []).append(math.log(b / c))
    return {g: (math.exp(sum(v) / len(v)),
                own_noise({k: x[2] for k, x in timed.items() if x[0] == g}, floor,
                          stat="tail"))
            for g, v in logs.items()}


# -- roofline quarantine ---------------------------------------------------------------
ROOFLINE_MARGIN = 4.0  # a case must beat the peaks by this factor to be called impossible


def roofline_floor_ms(spec: OpSpec, sizes: dict[str, int], gbps: float | None,
                      gflops: float | None, cache_bytes: int | None, input_sets: int,
                      cache_gbps: float | None = None) -> float:
    """The least time the machine's peaks allow for one case (0 when nothing bounds it).

    The memory bandwidth bounds a case whose rotating working set (input sets x the op's
    bytes) is larger than the last-level cache; a cache-resident case is bounded by the
    cache's bandwidth instead (`cache_gbps`, where measured). The compute bound always
    counts."""
    floor = 0.0
    nbytes, flops = spec.cost_bytes(sizes), spec.cost_flops(sizes)
    resident = cache_bytes is not None and input_sets * nbytes <= cache_bytes
    bw = cache_gbps if resident else gbps
    if bw and nbytes:
        floor = max(floor, nbytes / (bw * 1e9) * 1e3)
    if gflops and flops:
        floor = max(floor, flops / (gflops * 1e9) * 1e3)
    return floor


def roofline_finding(rows: list[CaseRow], spec: OpSpec, be: Backend, input_sets: int) -> str:
    """Why a result is faster than the machine allows (the worst case), or "".

    A case whose median beats the roofline floor by more than ROOFLINE_MARGIN cannot be
    an honest measurement. Asked only when a win is claimed, so the peaks are measured
    (once per machine, cached) only then."""
    pk = be.peak_rates()
    worst = None
    for row in rows:
        # under the timing floor the clock resolves nothing (a median of 0 is round-trip
        # jitter): such a case's speedup is clamped to 1, and it says nothing of the peaks
        if row.median_ms is None or row.median_ms < be.timing_floor_ms:
            continue
        floor = roofline_floor_ms(spec, row.sizes, pk.gbps, pk.gflops, pk.cache_bytes,
                                  input_sets, pk.cache_gbps)
        if floor > 0 and row.median_ms * ROOFLINE_MARGIN < floor and \
                (worst is None or row.median_ms / floor < worst[0]):
            worst = (row.median_ms / floor, row, floor)
    if worst is None:
        return ""
    _, row, floor = worst
    return (f"suspicious: {row.group} case {row.case} took {row.median_ms:.4g} ms, under the "
            f"roofline floor of {floor:.4g} ms ({pk.what}); quarantined, not accepted")
