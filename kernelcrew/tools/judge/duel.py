"""Two kernels raced side by side: many short alternating rounds in one pair of workers.

Each kernel runs in its own sandboxed worker, both alive at once, only one of them
running at any moment: the other is stopped (see `session`), so no thread of one kernel
can take a CPU, a cache or memory bandwidth from the other's timed runs. For every case
the parent asks each worker in turn for a short batch of timed runs (who goes first
alternates from round to round), so the two kernels see the same machine within
milliseconds of each other, many times over, and the rounds give the gate an estimate
of the spread of the speedup (see `gate`).

Both kernels get the same plan: timed run r of a case finds the same input changes for
both (one float64 reference serves both when r is checked), and the same runs are
checked in full. The parent's clock times every call; the busy share of the machine in
each round, less the CPU time of the parent and the two workers (the kernel's own work
must not make a round look like another job's), lets the gate leave out rounds in which
another job started.

However the duel ends (a kernel failed, the parent raised), no worker outlives it: the
parent ends both, politely when the duel finished, by killing their sandboxes when not.
"""

from __future__ import annotations

import math
import os
import secrets
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from kernelcrew.kernels.kernelfile import KernelFile
from kernelcrew.results import CompileResult
from kernelcrew.tools.judge.harness import Harness, KernelRun, case_key, plan_checks
from kernelcrew.tools.judge.procs import cpu_ticks
from kernelcrew.tools.judge.runs import Contender
from kernelcrew.tools.judge.session import SessionFailed


@dataclass
class Duel:
    a: KernelRun
    b: KernelRun
    rounds: int
    # "a"/"b" -> case key -> per round, the ms of that round's timed runs
    per_round: dict[str, dict[str, list[list[float]]]] = field(default_factory=dict)
    busy: list[float] = field(default_factory=list)  # machine busy share per round, 0..1
    failed: str = ""  # "a" or "b": which kernel failed (its run says why)
    integrity: str = ""  # "a" or "b": its failure is the judge's own check of the worker

    def round_samples(self, who: str) -> list[dict[str, list[float]]]:
        """Per round: case key -> the timed runs of that round's batch (ms)."""
        out: list[dict[str, list[float]]] = [{} for _ in range(self.rounds)]
        for key, rounds in self.per_round.get(who, {}).items():
            for r, times in enumerate(rounds):
                out[r][key] = times
        return out


def pooled(first: Duel, second: Duel) -> Duel:
    """Two duels of the same two kernels as one: the second's rounds follow the first's,
    its rows are the second's. Both must have finished with both kernels correct."""
    def runs(x: KernelRun, y: KernelRun) -> KernelRun:
        keys = set(x.samples) | set(y.samples)
        return replace(y, samples={k: x.samples.get(k, []) + y.samples.get(k, []) for k in keys})

    per_round = {who: {k: first.per_round.get(who, {}).get(k, [])
                       + second.per_round.get(who, {}).get(k, [])
                       for k in set(first.per_round.get(who, {}))
                       | set(second.per_round.get(who, {}))}
                 for who in ("a", "b")}
    return Duel(runs(first.a, second.a), runs(first.b, second.b), first.rounds + second.rounds,
                per_round, first.busy + second.busy)


def _busy_sample(pids: list[int]) -> tuple[int, int]:
    """The machine's clock ticks so far, and those spent idle or by the judge itself (the
    parent and the two workers). The kernels' own CPU time never counts as the machine
    being busy: a kernel that spins in some rounds would otherwise have those rounds left
    out as load outliers, and with them its slow calls."""
    try:
        vals = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    except (OSError, ValueError):
        return 0, 0
    ours = cpu_ticks() + sum(cpu_ticks(p) for p in pids)
    return sum(vals), vals[3] + (vals[4] if len(vals) > 4 else 0) + ours


SAMPLE_SLACK = 1.0  # clock ticks a busy sample may be off by without any load
WARM_SEED = 1 << 30  # the warm-up calls' own stream of input changes (never a run's)


class _Failed(Exception):
    def __init__(self, who: str) -> None:
        super().__init__(who)
        self.who = who


def duel(h: Harness, a: tuple[CompileResult, KernelFile], b: tuple[CompileResult, KernelFile],
         *, reps: int | None = None, rounds: int | None = None,
         cache: dict[str, str] | None = None) -> Duel:
    """Time kernels a and b on every case in alternating rounds (see the module text).

    `reps` timed runs per case and kernel are split over `rounds` batches; `cache` maps
    a case key to `cold` or `warm` (default: each case's state from the op, see
    `Harness.cache_state`)."""
    reps = reps if reps is not None else h.bench.reps
    rounds = max(1, min(rounds or h.bench.rounds, reps))
    cache = cache if cache is not None else {case_key(c): h.cache_state(c) for c in h.cases}
    per_round_n = [reps // rounds + (1 if r < reps % rounds else 0) for r in range(rounds)]
    wall = h.limits.timeout_s * (2 * len(h.cases) + 3) + 10
    try:
        cpus = sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = []
    seed = [secrets.randbits(31), secrets.randbits(31)]  # the run's changes: the parent's
    cs: dict[str, Contender] = {}
    busy_acc = [[0.0, 0.0, 0.0] for _ in range(rounds)]
    failed, finished = "", False
    per_round: dict[str, dict[str, list[list[float]]]] = {"a": {}, "b": {}}
    try:
        for who, (comp, kf) in (("a", a), ("b", b)):
            cs[who] = Contender(h, comp, kf, wall_s=wall, name=who)
            try:
                cs[who].start()
            except SessionFailed as e:
                cs[who].fail(e)
                raise _Failed(who) from None
        for ci, c in enumerate(h.cases):
            key, d = case_key(c), h.data(c)
            nsets = len(d.slots)
            for who, cn in cs.items():
                try:
                    cn.open_case(ci)
                    if not cn.first_calls(ci):
                        raise _Failed(who)
                except SessionFailed as e:
                    cn.fail(e)
                    raise _Failed(who) from None
            checked = plan_checks(reps, nsets, np.random.default_rng(seed + [ci]))
            refs: dict[int, dict[str, np.ndarray]] = {}

            def ref_for(r: int, k: int, c=c, d=d, refs=refs) -> dict[str, np.ndarray]:
                if r not in refs:  # the changes are applied: the inputs of run r
                    refs[r] = h.reference(c, {n: np.array(v) for n, v in d.inputs(k).items()})
                return refs[r]

            warm = cache.get(key) == "warm"
            try:
                _rounds(h, cs, ci, key, rounds, per_round_n, warm, cpus, seed, checked,
                        ref_for, per_round, busy_acc)
            finally:
                for k in range(nsets):
                    d.restore(k)
        finished = True
    except _Failed as e:
        failed = e.who
    finally:
        for cn in cs.values():
            cn.finish(finished)
    runs = {who: cn.result() for who, cn in cs.items()}
    for who in ("a", "b"):
        if who not in runs:  # never started (the first failed while starting)
            runs[who] = KernelRun(runs["a"].outcome.model_copy(update={
                "ok": False, "reason": "not started"}), [])
    # /proc counts whole clock ticks (10 ms), so a sample's idle-and-ours can come out a
    # tick or two off the machine's total (on an idle 2-core VM, rounds of 10-20 ticks
    # read -2..+2): SAMPLE_SLACK ticks per sample, added as independent errors, are not
    # taken for load
    busy = [max(0.0, (t - i - SAMPLE_SLACK * math.sqrt(n)) / t) if t > 0 else 0.0
            for t, i, n in busy_acc]
    integrity = failed if failed and cs[failed].integrity else ""
    return Duel(runs["a"], runs["b"], rounds, per_round, busy, failed, integrity)


def _rounds(h: Harness, cs: dict[str, Contender], ci: int, key: str, rounds: int,
            per_round_n: list[int], warm: bool, cpus: list[int], seed: list[int],
            checked: set[int], ref_for, per_round: dict, busy_acc: list[list[float]]) -> None:
    """Case ci's alternating rounds (see the module text)."""
    start = 0
    for rnd in range(rounds):
        order = ("a", "b") if (rnd + ci) % 2 == 0 else ("b", "a")
        cpu = cpus[(rnd // 2 + ci) % len(cpus)] if cpus else None
        pids = [cn.session.proc.pid for cn in cs.values() if cn.session.proc is not None]
        t0, i0 = _busy_sample(pids)
        for who in order:
            times = _batch(h, cs[who], ci, start, per_round_n[rnd], warm, cpu, cpus, seed,
                           checked, ref_for, who)
            per_round[who].setdefault(key, []).append(times)
        t1, i1 = _busy_sample(pids)
        busy_acc[rnd][0] += t1 - t0
        busy_acc[rnd][1] += i1 - i0
        busy_acc[rnd][2] += 1
        start += per_round_n[rnd]


def _batch(h: Harness, cn: Contender, ci: int, start: int, n: int, warm: bool,
           cpu: int | None, cpus: list[int], seed: list[int], checked: set[int],
           ref_for, who: str) -> list[float]:
    """One round's batch of n timed runs of one kernel on case ci (see the module text)."""
    c = h.cases[ci]
    nsets = len(h.data(c).slots)
    st = cn.state[case_key(c)]
    first = len(st.times)
    try:
        threads = cn.session.place(cpu, cpus)
        if warm:  # the other kernel ran in between: one call to warm the caches again,
            # on inputs of its own (what the other kernel's run left in the input set may
            # be the very inputs of this kernel's next run: a call on them would let a
            # kernel keep the answer)
            k = start % nsets
            views = h.data(c).inputs(k)
            ch = h.fresh_changes(c, k, seed + [WARM_SEED, start])
            ch.apply(views)
            try:
                cn.warm(ci, k, 1)
            finally:
                ch.undo(views)
            if threads <= 1:
                cn.session.place(cpu, cpus)  # the warm-up may have made a team
        for j in range(n):
            r = start + j
            k = r % nsets
            changes = h.fresh_changes(c, k, seed + [r])
            if not cn.timed(ci, r, changes, r in checked, lambda r=r, k=k: ref_for(r, k),
                            not warm):
                raise _Failed(who)
    except SessionFailed as e:
        cn.fail(e)
        raise _Failed(who) from None
    return st.times[first:]
