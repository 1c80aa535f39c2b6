"""`kernelcrew check`: is this kernel correct, and is it faster than the op's baseline?"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from kernelcrew.errors import InputError, PolicyViolation
from kernelcrew.kernels.kernelfile import KernelFile, load_kernel, validate_against
from kernelcrew.kernels.spec import OpSpec, load_op
from kernelcrew.results import CaseRow, CheckResult, CompileResult
from kernelcrew.tools.backends import peaks
from kernelcrew.tools.backends.backend import Backend, get_backend
from kernelcrew.tools.backends.cuda import probe_device
from kernelcrew.tools.config import BenchSettings, Limits
from kernelcrew.tools.judge.duel import Duel, crosschecked_duel
from kernelcrew.tools.judge.gate import (
    GateDecision,
    bootstrap_noise,
    decide,
    load_outliers,
)
from kernelcrew.tools.judge.harness import Harness, KernelRun, case_key
from kernelcrew.tools.locks import bench_lock

Progress = Callable[[str], None]


def load_candidate(path: str | Path | KernelFile, spec: OpSpec, backend: str) -> KernelFile:
    """Load a kernel file; a policy violation in it is re-raised for a `rejected` verdict."""
    kf = path if isinstance(path, KernelFile) else load_kernel(path)
    if kf.backend != backend:
        raise InputError(f"is a {kf.backend} kernel file but the backend is {backend}; "
                         f"pass --backend {kf.backend}", path=kf.path)
    validate_against(kf, spec)
    return kf


def compare_rows(cand: KernelRun, base: KernelRun, harness: Harness) -> list[CaseRow]:
    """Per-case medians and speedups; medians under the backend's timing floor are clamped."""
    import numpy as np

    floor = harness.backend.timing_floor_ms
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
            row.speedup = max(row.baseline_ms, floor) / max(row.median_ms, floor)
        rows.append(row)
    return rows


def judge_duel(h: Harness, d: Duel, min_speedup: float, *, challenger: str = "a",
               against: str = "the baseline") -> tuple[list[CaseRow], GateDecision]:
    """Rows (challenger vs the other kernel) and the gate's decision for a finished duel
    in which both kernels were correct. Rounds during which the machine was much busier
    than in the others are left out (gate.load_outliers); the measured noise is the bootstrap
    interval of the overall speedup over the rounds kept (gate.bootstrap_noise)."""
    other = "b" if challenger == "a" else "a"
    drop = load_outliers(d.busy)
    keep = [r for r in range(d.rounds) if r not in drop]
    cr, orr = d.round_samples(challenger), d.round_samples(other)
    crun, orun = (d.a, d.b) if challenger == "a" else (d.b, d.a)

    def pooled(run: KernelRun, per_round: list[dict[str, list[float]]]) -> KernelRun:
        samples: dict[str, list[float]] = {}
        for r in keep:
            for k, v in per_round[r].items():
                samples.setdefault(k, []).extend(v)
        return KernelRun(run.outcome, run.rows, samples)

    weights = {g: s.weight for g, s in h.spec.shapes.items()}
    rows = compare_rows(pooled(crun, cr), pooled(orun, orr), h)
    # per case: the challenger's and the other kernel's runs in each kept round
    per_case = {case_key(c): (c.group, [cr[r].get(case_key(c), []) for r in keep],
                              [orr[r].get(case_key(c), []) for r in keep]) for c in h.cases}
    timed = {k: v for k, v in per_case.items() if all(v[1]) and all(v[2])}
    noise = bootstrap_noise(timed, weights, h.backend.timing_floor_ms)
    group_noise = {g: bootstrap_noise({k: v for k, v in timed.items() if v[0] == g}, {g: 1.0},
                                      h.backend.timing_floor_ms)
                   for g in {v[0] for v in timed.values()}}
    gate = decide(rows, weights, min_speedup, against=against, noise=noise, rounds=len(keep),
                  group_noise=group_noise)
    if drop:
        gate = GateDecision(**{**gate.__dict__, "reason": gate.reason + (
            f" ({len(drop)} round(s) left out: the machine was busier then)")})
    return rows, gate


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
        say(f"timing: {len(h.cases)} cases x {bench.reps} runs per kernel, in "
            f"{min(bench.rounds, bench.reps)} alternating rounds (candidate and baseline)")
        with bench_lock():  # a report the parent's clock contradicts is timed once more
            d, forged = crosschecked_duel(h, (comp, kf), (base_comp, base_kf), reps=bench.reps,
                                          rounds=bench.rounds)
        # a worker that failed ended the duel: only its kernel is judged by it
        if d.failed != "b" and not d.a.correct:
            return rejected(d.a.first_failure(), comp, d.a.rows)
        if not d.b.correct:
            raise InputError(f"the op's own baseline fails: {d.b.first_failure()}",
                             path=base_kf.path)
        if forged:
            return rejected(forged, comp, d.a.rows)
        rows, gate = judge_duel(h, d, bench.min_speedup)
        res = CheckResult(op=spec.name, kernel=name, backend=be.name, correct=True,
                          verdict=gate.verdict, speedup=gate.speedup, reason=gate.reason,
                          noise_band=gate.band, measured_noise=gate.measured_noise,
                          min_speedup=gate.min_speedup, rounds=gate.rounds,
                          cache={case_key(c): h.cache_state(c) for c in h.cases},
                          rows=rows, compile=comp,
                          group_speedups=gate.group_speedups, sandbox=Harness.sandbox())
        return roofline_quarantine(res, spec, be, bench)


# -- roofline quarantine ---------------------------------------------------------------
ROOFLINE_MARGIN = 4.0  # a case must beat the peaks by this factor to be called impossible


def roofline_floor_ms(spec: OpSpec, sizes: dict[str, int], gbps: float | None,
                      gflops: float | None, cache_bytes: int | None, input_sets: int) -> float:
    """The least time the machine's peaks allow for one case (0 when nothing bounds it).

    The bandwidth bound counts only when the rotating working set (input sets x the
    op's bytes) is larger than the last-level cache: a cache-resident case may beat the
    memory bandwidth honestly. The compute bound always counts."""
    floor = 0.0
    nbytes, flops = spec.cost_bytes(sizes), spec.cost_flops(sizes)
    if gbps and nbytes and (cache_bytes is None or input_sets * nbytes > cache_bytes):
        floor = max(floor, nbytes / (gbps * 1e9) * 1e3)
    if gflops and flops:
        floor = max(floor, flops / (gflops * 1e9) * 1e3)
    return floor


def _peak_rates(be: Backend) -> tuple[float | None, float | None, int | None, str]:
    """(GB/s, GFLOP/s, cache bytes, what) of this machine; Nones when unknown."""

    try:
        if be.name == "cpu":
            pk = peaks.cpu_peaks()
            llc = int(pk.llc_mib * 2**20) if pk.llc_mib else None
            # the highest rates any of the measurements allow (peaks measured on a busy
            # machine read low, and a floor must never be too high), for a kernel that
            # only reads (the highest ceiling of any mix)
            gbps = peaks.bandwidth_ceiling(
                max(pk.triad_gbps, pk.triad_1t_gbps * pk.threads, pk.numpy_copy_gbps),
                max(pk.read_gbps or 0, (pk.read_1t_gbps or 0) * pk.threads) or None, 0.0)
            gflops = max(pk.fma_gflops, pk.fma_1t_gflops * pk.threads)
            return gbps, gflops, llc, "cpu peaks"
        if be.name == "cuda":
            pk = peaks.cuda_peaks(be)
            return pk.copy_gbps, None, probe_device().l2_bytes or None, "device copy peak"
    except RuntimeError as e:  # the peak benchmark failed: no floor, and say so
        return None, None, None, f"peaks unknown ({e})"
    return None, None, None, "no peaks for this backend"


def roofline_quarantine(res: CheckResult, spec: OpSpec, be: Backend,
                        bench: BenchSettings) -> CheckResult:
    """Quarantine a result faster than bytes/peak bandwidth or flops/peak rate allows.

    A case whose median beats the roofline floor by more than ROOFLINE_MARGIN cannot be
    an honest measurement (a forged timing, work done outside the timed call): the
    result is marked `suspicious` and its `faster` verdict is not accepted. Only `faster`
    results are examined (nothing else is accepted), so the peaks are measured (once
    per machine, cached) only when a win is claimed."""
    if not res.correct or not res.ran or res.verdict != "faster":
        return res
    gbps, gflops, cache, what = _peak_rates(be)
    worst = None
    for row in res.rows:
        if row.median_ms is None:
            continue
        floor = roofline_floor_ms(spec, row.sizes, gbps, gflops, cache, bench.input_sets)
        if floor > 0 and row.median_ms * ROOFLINE_MARGIN < floor and \
                (worst is None or row.median_ms / floor < worst[0]):
            worst = (row.median_ms / floor, row, floor)
    if worst is None:
        return res
    _, row, floor = worst
    why = (f"suspicious: {row.group} case {row.case} took {row.median_ms:.4g} ms, under the "
           f"roofline floor of {floor:.4g} ms ({what}); quarantined, not accepted")
    return res.model_copy(update={"suspicious": True, "verdict": "same",
                                  "reason": f"{why} (gate said: {res.reason})"})
