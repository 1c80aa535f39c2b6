"""Part 1: the eval suite on the library (CPU, heuristic crew, at most --budget iterations),
with NumPy timed right after each operator's run; the gate's noise per run."""

from __future__ import annotations

import re
import statistics
from typing import Any

from kernelcrew.evals import peers as P
from kernelcrew.evals import suite as S
from kernelcrew.evals.bench.section import BenchRun, Section, fmt, status
from kernelcrew.trace import read_trace

SPEEDUP_TARGETS = {"small_matmul": 3.0, "add_gelu_muladd": 2.0}  # issue 4; others 1.5x
DEFAULT_TARGET = 1.5
_BAND = re.compile(r"noise band of ±(\d+(?:\.\d+)?)%")


def gate_noise(run_dir: str) -> dict[str, Any]:
    """The noise bands and verdicts of a run's races, from its trace."""
    bands, verdicts = [], {"faster": 0, "same": 0, "slower": 0}
    for e in read_trace(run_dir):
        if e.get("node") != "benchmark":
            continue
        v = e.get("verdict")
        if v in verdicts:
            verdicts[v] += 1
        m = _BAND.search(e.get("summary", ""))
        if m:
            bands.append(float(m.group(1)) / 100)
    return {"races": sum(verdicts.values()), **verdicts,
            "median_band": statistics.median(bands) if bands else None,
            "max_band": max(bands) if bands else None}


def run(b: BenchRun) -> None:
    b.say(f"part 1: the eval suite on {len(b.ops)} operators")
    b.data["numpy"] = {}

    def numpy_now(row: S.OpRow) -> None:
        if "numpy" in b.skip or row.error:
            return
        npr = P.numpy_peer(row.op, reps=b.settings.reps)
        b.data["numpy"][row.op] = npr
        b.say(f"NumPy {row.op}: {fmt(npr.typical_ms, '{:.4g}')} ms {npr.error}")

    suite = S.run_suite(b.settings, say=b.say, after_op=numpy_now)
    b.data["suite"] = suite
    b.data["noise"] = {r.op: gate_noise(r.run_dir) for r in suite.rows if r.run_dir}
    b.runs_for_overhead.extend(suite.rows)


def render(data: dict[str, Any]) -> list[str]:
    suite: S.SuiteResult | None = data.get("suite")
    L: list[str] = []
    add = L.append
    _f = fmt
    if suite is None:
        return L
    add("## 1. Eval suite: the library, CPU, heuristic crew\n")
    add(f"`kernelcrew eval` on the {len(suite.rows)} library operators. *baseline ms* and *best ms* are the "
        "sums of the typical cases' medians from the final side-by-side race of the best "
        "kernel against the baseline (the procedure of `kernelcrew check`); *speedup* is the "
        "crew's gate speedup, the weight-averaged geometric mean over all shape groups; "
        "*roofline* is the least time the measured peaks allow for the typical cases divided "
        "by the best time; *evals* counts candidates compiled and evaluated.\n")
    add(S.markdown_table(S.TABLE_HEADERS + ["stop"],
                         [S.table_cells(r) + [r.stop_reason[:50]] for r in suite.rows]))
    add("")
    add(S.summary_line(suite.summary) + ".\n")
    add("<details><summary>Per-case medians (ms) of the final race</summary>\n")
    case_rows = []
    for r in suite.rows:
        for c in r.rows:
            case_rows.append([r.op, c["group"], c["case"], _f(c.get("baseline_ms"), "{:.4g}"),
                              _f(c.get("median_ms"), "{:.4g}"),
                              f"{_f(c.get('p10_ms'), '{:.4g}')} - {_f(c.get('p90_ms'), '{:.4g}')}",
                              _f(c.get("speedup"), "{:.2f}x"), c.get("status", "")])
    add(S.markdown_table(["operator", "group", "case", "baseline ms", "best ms",
                          "best p10 - p90 ms", "speedup", "status"], case_rows))
    add("\n</details>\n")
    add("What the best kernel of each operator is (last accepted change): " + "; ".join(
        f"{r.op}: {r.best_kind}" for r in suite.rows) + ".\n")
    noise = data.get("noise", {})
    if noise:
        add("How noisy the machine was for the crew's gate: the noise band (±) each race "
            "reported, over the candidates of each run (a candidate must be faster by more "
            "than its band to be accepted). Verdicts: faster / same / slower.\n")
        add(S.markdown_table(["operator", "races", "median band", "widest band",
                              "faster / same / slower"],
                             [[op, str(n["races"]), _f(n["median_band"], "{:.0%}"),
                               _f(n["max_band"], "{:.0%}"),
                               f"{n['faster']} / {n['same']} / {n['slower']}"]
                              for op, n in noise.items()]))
        add("")
    return L


def goals(data: dict[str, Any]) -> list[list[str]]:
    suite: S.SuiteResult | None = data.get("suite")
    out = []
    for r in suite.rows if suite else []:
        target = SPEEDUP_TARGETS.get(r.op, DEFAULT_TARGET)
        sp = r.speedup if r.correct else None
        ok = sp is not None and sp >= target
        cut = (f" (cut by the wall budget after {r.iterations} iterations)"
               if "wall-clock budget" in r.stop_reason else "")
        out.append([f"{r.op} speedup, correct (4)", f">= {target:g}x",
                    (fmt(sp, "{:.2f}x") if sp else ("incorrect" if not r.error else "failed"))
                    + cut,
                    status(ok, f"{target - (sp or 1.0):.2f}x short ({(sp or 0) / target:.0%}"
                               " of the target)")])
    return out


SECTION = Section("suite", render, run, goals)
