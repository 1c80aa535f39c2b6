"""Part 5b: Kernel Tuner and the crew on the tunable kernels' knob spaces: evaluations each
needs to come within 5% of the brute-force optimum."""

from __future__ import annotations

import json
import math
import statistics
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from kernelcrew.evals import peers as P
from kernelcrew.evals import suite as S
from kernelcrew.evals.bench.section import BenchRun, Progress, Section, fmt, status
from kernelcrew.kernels.kernelfile import load_kernel
from kernelcrew.kernels.spec import load_op
from kernelcrew.tools.backends.backend import get_backend
from kernelcrew.tools.config import BenchSettings
from kernelcrew.tools.judge.harness import Harness, case_key
from kernelcrew.tools.locks import bench_lock

KT_GOAL_OPS = 4  # issue 8: fewer evaluations than Kernel Tuner's best on at least 4 of 6


@dataclass
class KnobSearch:
    """The crew and Kernel Tuner on one op's tunable kernel."""

    op: str
    kt: P.KernelTunerResult
    crew_row: S.OpRow | None = None
    crew_evals: int | None = None  # evaluations (the baseline counted) to within 5%
    crew_total_evals: int = 0
    crew_best_ms: float | None = None  # the crew's best, re-timed with the KT optimum
    optimum_ms_crew_timer: float | None = None  # the KT optimum in the crew's harness
    trajectory: list[dict] = field(default_factory=list)
    error: str = ""



def knob_search(op: str, settings: S.EvalSettings, work: Path, say: Progress, *,
                kt_seeds: int) -> KnobSearch:
    """Kernel Tuner's strategies, then the crew on a folder whose baseline is the tunable
    kernel at its default knobs; both counted to within 5% of the brute-force optimum."""
    say(f"Kernel Tuner on {op}: brute force, then strategies replayed x{kt_seeds}")
    kt = P.kernel_tuner_peer(op, seeds=kt_seeds)
    ks = KnobSearch(op, kt)
    if kt.error or kt.optimum is None:
        ks.error = f"Kernel Tuner: {kt.error}"
        say(f"{op}: {ks.error}")
        return ks
    best = kt.best_strategy()
    say(f"{op}: space {kt.size}, optimum {kt.optimum} at {kt.optimum_ms:.3f} ms; best strategy "
        f"{best.strategy if best else 'none'} ({best.median_evals if best else '-'} evals) in "
        f"{kt.seconds:.0f} s")
    folder = P.tunable_op_folder(op, work / "ops")
    say(f"the crew on {op}'s tunable kernel (default knobs {load_kernel(kt.tunable).meta.knobs})")
    row = S.run_operator(str(folder), settings, work / "runs", say=say)
    ks.crew_row = row
    if row.error or not row.run_dir:
        ks.error = f"crew run failed: {row.error}"
        return ks
    result = json.loads((Path(row.run_dir) / "result.json").read_text())
    traj = S.accepted_trajectory(row.run_dir, result)
    ks.crew_total_evals = 1 + len(S.evaluation_sequence(row.run_dir))
    opt_kf = load_kernel(kt.tunable).with_changes(knobs=kt.optimum)
    opt_path = Path(row.run_dir) / "kernel_tuner_optimum.cpp"
    opt_path.write_text(opt_kf.text)
    kernels = [opt_path, Path(row.run_dir) / "baseline.cpp"] + [Path(p) for _, _, p in traj]
    say(f"re-timing the KT optimum and the crew's {len(traj)} accepted kernel(s) side by side")
    times = retime(folder, kernels, settings.reps)
    ks.optimum_ms_crew_timer = times[0]
    if times[0] is None:
        ks.error = "the Kernel Tuner optimum failed in the crew's harness"
        return ks
    target = times[0] * (1 + P.WITHIN)
    # evaluation 1 is the baseline (the default knobs); candidate n is evaluation n + 1
    seq: list[tuple[int, float | None, Path]] = [(1, times[1], kernels[1])]
    seq += [(n + 1, t, Path(p)) for (n, _s, p), t in zip(traj, times[2:], strict=True)]
    best_ms = math.inf
    for n, t, path in seq:
        if t is not None:
            best_ms = min(best_ms, t)
        # the optimum configuration itself is within 5% of itself, whatever the noise says
        same = same_kernel(load_kernel(path), opt_kf)
        ks.trajectory.append({"evaluation": n, "kernel": path.name, "ms": t,
                              "is_optimum": same})
        if ks.crew_evals is None and (best_ms <= target or same):
            ks.crew_evals = n
    ks.crew_best_ms = best_ms if math.isfinite(best_ms) else None
    say(f"{op}: crew within 5% after {ks.crew_evals or 'never (' + str(ks.crew_total_evals) + ')'}"
        f" evaluations; KT best {best.median_evals if best else '-'}")
    return ks


def same_kernel(a: Any, b: Any) -> bool:
    """The same code, flags and knob values (front matter formatting aside)."""
    return (a.body.strip() == b.body.strip() and list(a.meta.flags) == list(b.meta.flags)
            and dict(a.meta.knobs) == dict(b.meta.knobs))


def retime(folder: Path, kernels: list[Path], reps: int, rounds: int = 3) -> list[float | None]:
    """Median ms of each kernel on the typical case, timed in alternating rounds."""
    spec = load_op(folder)
    be = get_backend("cpu")
    case = next(c for c in spec.cases() if c.group == "typical")
    kfs = [load_kernel(k) for k in kernels]
    comps = [be.compile(kf, spec) for kf in kfs]
    samples: list[list[float]] = [[] for _ in kernels]
    with Harness(spec, be, seed=0, bench=BenchSettings(reps=reps), cases=[case]) as h, \
            bench_lock():
        for _ in range(rounds):
            for i, (kf, comp) in enumerate(zip(kfs, comps, strict=True)):
                if not comp.ok:
                    continue
                run = h.run(comp, kf, reps=max(3, reps // rounds))
                if run.correct:
                    samples[i] += run.samples.get(case_key(case), [])
    return [statistics.median(s) if s else None for s in samples]





def tunable_ops(ops: list[str]) -> list[str]:
    """The ops that have a tunable kernel file (a knob space to search)."""
    return [op for op in ops if (P.TUNABLE_DIR / f"{op}.cpp").exists()]


def run(b: BenchRun) -> None:
    ops = tunable_ops(b.ops)
    b.say(f"part 5b: Kernel Tuner and the crew on the tunable kernels ({', '.join(ops)})")
    kt_settings = S.EvalSettings(**{**asdict(b.settings), "memory": "off",
                                    "wall_budget_s": b.options["tunable_wall_s"]})
    b.data["knobs"] = [knob_search(op, kt_settings, b.work / "knobs", b.say,
                                   kt_seeds=b.options["kt_seeds"]) for op in ops]


def render(data: dict[str, Any]) -> list[str]:
    L: list[str] = []
    add = L.append
    _f = fmt
    add("### 5b. Kernel Tuner on the same knob spaces\n")
    add("Each operator has a tunable kernel file (`kernelcrew/evals/peers/tunable/<op>.cpp`) whose "
        "front matter declares knobs and whose `// knob space:` line lists their values. "
        "Kernel Tuner (C backend, g++ with the file's flags) tunes a wrapper that times one "
        "call with `clock_gettime` and returns milliseconds (its C backend averages what the "
        "function returns; 7 calls per configuration), on the op's largest typical case, with "
        "every configuration checked against the float64 reference. brute_force is measured; "
        "the other strategies are replayed over its cache in Kernel Tuner's simulation mode "
        f"({data.get('kt_seeds')} seeds each, median; a strategy counts as reaching the target "
        "only when most seeds do), with Kernel Tuner's default options except a smaller "
        "initial sample for bayes_opt and a population of size/3 for genetic_algorithm (their "
        "defaults fail or stop after 2-3 evaluations on spaces this small). The crew ran on a "
        "copy of the op whose baseline is the tunable kernel at its default knobs, typical "
        "group = that one case (boundary cases still checked), memory off. Its count: "
        "evaluations (the baseline is evaluation 1) until its best so far is within 5% of the "
        "Kernel Tuner optimum, both timed by the crew's harness side by side afterwards, so "
        "each tool is judged by its own timer against the same optimum configuration.\n")
    kt_rows = []
    for ks in data.get("knobs", []):
        kt = ks.kt
        by = {s.strategy: s for s in kt.strategies}

        def cell(name: str, by: dict = by) -> str:
            s = by.get(name)
            if s is None:
                return "-"
            if s.error:
                return f"failed: {s.error[:50]}"
            if s.median_evals is None or s.reached * 2 <= s.runs:
                return f"not reached ({s.reached}/{s.runs})"
            return f"{s.median_evals:g}" + (f" ({s.reached}/{s.runs})" if s.runs > 1 else "")

        best = kt.best_strategy()
        crew = ks.crew_evals
        kt_rows.append([
            ks.op, str(kt.size), ", ".join(f"{k}={v}" for k, v in (kt.optimum or {}).items()),
            _f(kt.optimum_ms, "{:.3g}"), cell("brute_force"), cell("random_sample"),
            cell("genetic_algorithm"), cell("bayes_opt"),
            (f"{crew}" if crew is not None else f"not reached ({ks.crew_total_evals})")
            if not ks.error else f"failed: {ks.error[:60]}",
            _f(ks.crew_best_ms / ks.optimum_ms_crew_timer
               if ks.crew_best_ms and ks.optimum_ms_crew_timer else None, "{:.2f}"),
            ("yes" if crew is not None and best and crew < best.median_evals else "no")
            if best else "-"])
    add(S.markdown_table(["operator", "space", "KT optimum", "KT opt ms", "brute_force",
                          "random_sample", "genetic_algorithm", "bayes_opt", "crew",
                          "crew best / optimum", "crew fewer"], kt_rows))
    add("\n*crew best / optimum*: the crew's best time over the optimum configuration's, both "
        "in the crew's harness (below 1: the crew went past the knob space with source "
        "changes).\n")
    return L


def goals(data: dict[str, Any]) -> list[list[str]]:
    ks_list = data.get("knobs", [])
    if not ks_list:
        return []
    wins = 0
    for ks in ks_list:
        best = ks.kt.best_strategy()
        if ks.crew_evals is not None and best and ks.crew_evals < best.median_evals:
            wins += 1
    return [[("crew needs fewer evaluations than Kernel Tuner's best strategy to come "
              "within 5% of the optimum (8)"), f">= {KT_GOAL_OPS} of {len(ks_list)} ops",
             f"{wins} of {len(ks_list)}",
             status(wins >= KT_GOAL_OPS, f"{KT_GOAL_OPS - wins} op(s) short")]]


SECTION = Section("kt", render, run, goals)
