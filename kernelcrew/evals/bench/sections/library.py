"""Part 6: every operator with its peers side by side in one harness (issue 16).

Per operator: the baseline; the compiler alone (the baseline's source at -O3 -march=native,
plus -fopenmp where the source already has OpenMP pragmas); the hand-written fast kernel
(tests/kernels/<op>/); Kernel Tuner's optimum where the op has a knob space (part 5b); the
crew's best (part 1). All verified on every shape group, then timed on the typical cases in
alternating rounds in one harness. NumPy's time is part 1's (its own process, right after the
crew's run on the op). The roofline share uses a bandwidth peak measured per case in the
kernels' own cache state (kernelcrew.evals.peers.cache_state) and the machine's FMA peak.
"""

from __future__ import annotations

import json
import math
import statistics
from dataclasses import asdict, dataclass, field
from typing import Any

from kernelcrew.evals import peers as P
from kernelcrew.evals import suite as S
from kernelcrew.evals.bench.section import BenchRun, Section, fmt, status
from kernelcrew.evals.peers.cache_state import CaseBound, case_bounds, roofline_share
from kernelcrew.evals.peers.side_by_side import (
    compiler_alone,
    fast_kernel_path,
    has_openmp_pragmas,
    time_side_by_side,
)
from kernelcrew.kernels.kernelfile import load_kernel
from kernelcrew.kernels.spec import load_op

KERNELS = ("baseline", "compiler alone", "hand-written", "Kernel Tuner optimum", "crew")
OVER_COMPILER_EACH = 1.5  # every op: the crew's best at least this much over compiler alone
OVER_COMPILER_GEOMEAN = 4.0
ROOFLINE_MEDIAN = 0.5
MATCH = 0.05  # "matches the hand-written kernel": within 5% of its time, or faster
NUMPY_WITHIN = 2.0


@dataclass
class LibraryRow:
    op: str
    ms: dict[str, float | None] = field(default_factory=dict)  # kernel label -> typical ms
    case_ms: dict[str, dict[str, float]] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)
    openmp_in_baseline: bool = False
    numpy_ms: float | None = None
    numpy_expression: str | None = None
    bounds: list[CaseBound] = field(default_factory=list)
    roofline: dict[str, float | None] = field(default_factory=dict)  # label -> share

    def over_compiler(self, label: str = "crew") -> float | None:
        a, c = self.ms.get("compiler alone"), self.ms.get(label)
        return a / c if a and c else None


def _kt_optimum(data: dict[str, Any], op: str) -> Any:
    for ks in data.get("knobs", []):
        if ks.op == op and ks.kt.optimum and not ks.kt.error:
            return load_kernel(ks.kt.tunable).with_changes(knobs=ks.kt.optimum)
    return None


def side_by_side(b: BenchRun, op: str) -> LibraryRow:
    spec = load_op(op)
    base = load_kernel(spec.baseline_path("cpu"))
    row = LibraryRow(spec.name, openmp_in_baseline=has_openmp_pragmas(base))
    kernels = {"baseline": base, "compiler alone": compiler_alone(base)}
    fast = fast_kernel_path(spec.name)
    if fast:
        kernels["hand-written"] = load_kernel(fast)
    kt = _kt_optimum(b.data, spec.name)
    if kt is not None:
        kernels["Kernel Tuner optimum"] = kt
    suite: S.SuiteResult | None = b.data.get("suite")
    crew = next((r for r in suite.rows if r.op == spec.name), None) if suite else None
    if crew and crew.correct and crew.best_path:
        kernels["crew"] = load_kernel(crew.best_path)
    elif crew:
        row.errors["crew"] = crew.error or "the crew's best was not correct"
    timed = time_side_by_side(spec, kernels, reps=b.settings.reps, seed=b.settings.seed or 0)
    for label, t in timed.items():
        row.ms[label] = t.typical_ms
        row.case_ms[label] = t.case_ms
        if t.error:
            row.errors[label] = t.error
    npr = b.data.get("numpy", {}).get(spec.name)
    if npr is None and "numpy" not in b.skip:
        npr = P.numpy_peer(spec.name, reps=b.settings.reps)
        b.data.setdefault("numpy", {})[spec.name] = npr
    if npr is not None:
        row.numpy_ms, row.numpy_expression = npr.typical_ms, npr.expression
        if npr.error:
            row.errors["NumPy"] = npr.error
    if "roofline" not in b.skip:
        peaks = b.data.get("peaks")
        row.bounds = case_bounds(spec, peaks.gflops if peaks else None, b.work / "probes",
                                 reps=b.settings.reps, seed=b.settings.seed or 0)
        row.roofline = {label: roofline_share(row.bounds, row.case_ms.get(label, {}))
                        for label in row.ms}
    return row


def run(b: BenchRun) -> None:
    rows = []
    for k, op in enumerate(b.ops, 1):
        b.say(f"part 6 [{k}/{len(b.ops)}]: {op} side by side (baseline, compiler alone, "
              "hand-written, Kernel Tuner optimum, crew; bandwidth probe)")
        r = side_by_side(b, op)
        rows.append(r)
        # what is measured so far survives an interrupted bench
        (b.work / "library-partial.json").write_text(
            json.dumps([asdict(x) for x in rows], indent=1, default=str))
        b.say(f"{op}: " + ", ".join(f"{label} {fmt(ms, '{:.4g}')} ms"
                                    for label, ms in r.ms.items())
              + f", NumPy {fmt(r.numpy_ms, '{:.4g}')} ms; crew over compiler alone "
              f"{fmt(r.over_compiler(), '{:.2f}x')}, crew roofline "
              f"{fmt(r.roofline.get('crew'), '{:.0%}')}")
    b.data["library"] = rows


def _ms(r: LibraryRow, label: str) -> str:
    if label in r.errors and r.ms.get(label) is None:
        return "failed"
    return fmt(r.ms.get(label), "{:.4g}")


def render(data: dict[str, Any]) -> list[str]:
    rows: list[LibraryRow] = data.get("library") or []
    if not rows:
        return []
    L: list[str] = []
    add = L.append
    add("## 6. The library side by side (issue 16)\n")
    add("Every operator's kernels timed in one harness, one run: sums of the typical cases' "
        "medians in ms, every kernel first verified on every shape group. *compiler alone* is "
        "the baseline's own source at `-O3 -march=native` (plus `-fopenmp` where the source "
        "already has OpenMP pragmas, marked *omp*); *hand-written* the fast kernel under "
        "`tests/kernels/<op>/`; *KT optimum* Kernel Tuner's best knob values (part 5b, only "
        "where the op has a knob space); *crew* the crew's best from part 1; *NumPy* part 1's "
        "NumPy time (its own process). *roofline*: the least time the peaks allow over the "
        "time taken, with the bandwidth peak measured per case in the kernels' cache state "
        "(a triad as large as the case, timed by the same harness) and the FMA peak.\n")
    table = []
    for r in rows:
        table.append([r.op + (" (omp)" if r.openmp_in_baseline else ""),
                      _ms(r, "baseline"), _ms(r, "compiler alone"), _ms(r, "hand-written"),
                      _ms(r, "Kernel Tuner optimum") if "Kernel Tuner optimum" in r.ms else "-",
                      _ms(r, "crew") if ("crew" in r.ms or "crew" in r.errors) else "-",
                      fmt(r.numpy_ms, "{:.4g}"),
                      fmt(r.over_compiler("crew"), "{:.2f}x"),
                      fmt(r.over_compiler("hand-written"), "{:.2f}x"),
                      fmt(r.roofline.get("crew"), "{:.0%}"),
                      fmt(r.roofline.get("hand-written"), "{:.0%}")])
    add(S.markdown_table(["operator", "baseline", "compiler alone", "hand-written",
                          "KT optimum", "crew", "NumPy", "crew / compiler alone",
                          "hand-written / compiler alone", "crew roofline",
                          "hand-written roofline"], table))
    add("")
    errs = [f"{r.op} {label}: {e}" for r in rows for label, e in r.errors.items()]
    if errs:
        add("Kernels without a time: " + "; ".join(e[:200] for e in errs) + ".\n")
    add("<details><summary>Bandwidth peak per typical case, in the kernels' cache "
        "state</summary>\n")
    add("The triad and the read-only sweep are timed at the case's size; the peak is the one "
        "for the case's mix of reads and writes (between the sweep, nothing written, and the triad, a third written).\n")
    add(S.markdown_table(["operator", "case", "cost MB", "cost MFLOP", "triad GB/s",
                          "read sweep GB/s", "peak for its mix GB/s", "bound ms"],
                         [[r.op, cb.case, f"{cb.bytes / 1e6:.3g}", f"{cb.flops / 1e6:.3g}",
                           fmt(cb.triad_gbps, "{:.1f}"), fmt(cb.read_gbps, "{:.1f}"),
                           fmt(cb.gbps, "{:.1f}"), fmt(cb.bound_ms, "{:.4g}")]
                          for r in rows for cb in r.bounds]))
    add("\n</details>\n")
    return L


def goals(data: dict[str, Any]) -> list[list[str]]:
    rows: list[LibraryRow] = data.get("library") or []
    if not rows:
        return []
    out = []
    n = len(rows)
    crew_ran = any("crew" in r.ms or "crew" in r.errors for r in rows)
    if not crew_ran:
        return [["issue 16 goals (crew against its peers)", "-",
                 "the crew did not run (part 1 skipped)", "**not measured**"]]
    ratios = {r.op: r.over_compiler("crew") for r in rows}
    short = {op: x for op, x in ratios.items() if x is None or x < OVER_COMPILER_EACH}
    out.append([f"every op correct and >= {OVER_COMPILER_EACH:g}x over compiler alone (16)",
                f"{n} of {n}", f"{n - len(short)} of {n}",
                status(not short, "; ".join(f"{op} {fmt(x, '{:.2f}x')}"
                                            for op, x in short.items()))])
    # a failed or incorrect crew run leaves the user with the baseline
    gm_in = [x if x else (r.ms["compiler alone"] / r.ms["baseline"]
                          if r.ms.get("compiler alone") and r.ms.get("baseline") else 1.0)
             for r, x in ((r, ratios[r.op]) for r in rows)]
    gm = S.geomean(gm_in)
    out.append(["geomean over compiler alone (16)", f">= {OVER_COMPILER_GEOMEAN:g}x",
                fmt(gm, "{:.2f}x"),
                status(gm is not None and gm >= OVER_COMPILER_GEOMEAN,
                       f"{OVER_COMPILER_GEOMEAN - (gm or 0):.2f}x short")])
    shares = [r.roofline.get("crew") for r in rows]
    known = [s for s in shares if s is not None]
    med = statistics.median(known) if known else None
    out.append(["median best kernel's share of its roofline (16)", f">= {ROOFLINE_MEDIAN:.0%}",
                (fmt(med, "{:.0%}") + f" over {len(known)} ops") if known else "not measured",
                status(med is not None and med >= ROOFLINE_MEDIAN,
                       f"{(ROOFLINE_MEDIAN - (med or 0)) * 100:.0f} points short")])
    with_fast = [r for r in rows if r.ms.get("hand-written")]
    matched = [r.op for r in with_fast if r.ms.get("crew")
               and r.ms["crew"] <= r.ms["hand-written"] * (1 + MATCH)]
    need = math.ceil(len(with_fast) / 2)
    out.append([f"crew matches (within {MATCH:.0%}) or beats the hand-written kernel (16)",
                f">= {need} of {len(with_fast)}", f"{len(matched)} of {len(with_fast)}",
                status(len(matched) >= need, f"{need - len(matched)} op(s) short")])
    np_rows = [r for r in rows if r.numpy_ms]
    far = [r.op for r in np_rows if not r.ms.get("crew")
           or r.ms["crew"] > NUMPY_WITHIN * r.numpy_ms]
    faster = [r.op for r in np_rows if r.ms.get("crew") and r.ms["crew"] < r.numpy_ms]
    out.append([f"crew within {NUMPY_WITHIN:g}x of NumPy on every op NumPy expresses (16)",
                f"{len(np_rows)} of {len(np_rows)}",
                f"{len(np_rows) - len(far)} of {len(np_rows)}", status(not far, "slower than 2x NumPy: " + ", ".join(far))])
    most = len(np_rows) // 2 + 1
    out.append(["crew faster than NumPy on most of those ops (16)",
                f">= {most} of {len(np_rows)}", f"{len(faster)} of {len(np_rows)}",
                status(len(faster) >= most, f"{most - len(faster)} op(s) short")])
    return out


SECTION = Section("library", render, run, goals, needs=("suite", "kt"))
