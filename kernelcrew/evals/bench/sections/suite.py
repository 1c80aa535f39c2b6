"""Part 1: the eval suite on the library (CPU, heuristic crew, at most --budget iterations),
with NumPy timed right after each operator's run; the gate's noise per run."""

from __future__ import annotations

import json
import re
import statistics
from pathlib import Path
from typing import Any

from kernelcrew.evals import peers as P
from kernelcrew.evals import suite as S
from kernelcrew.evals.bench.section import BenchRun, Section, fmt, status
from kernelcrew.trace import read_trace

SPEEDUP_TARGETS = {"small_matmul": 3.0, "add_gelu_muladd": 2.0}  # issue 4; others 1.5x
DEFAULT_TARGET = 1.5
_BAND = re.compile(r"band of ±(\d+(?:\.\d+)?)%")
_NOISE = re.compile(r"measured noise ±(\d+(?:\.\d+)?)%")
NOISE_GOAL = 0.05  # issue 15: the median measured noise of the final races


def gate_noise(run_dir: str) -> dict[str, Any]:
    """The noise bands, measured noise, verdicts and durations of a run's races, from its
    trace, and the measured noise of its final race (the best kernel against the
    baseline) from its result."""
    bands, noises, seconds = [], [], []
    verdicts = {"faster": 0, "same": 0, "slower": 0}
    final_s = None
    for e in read_trace(run_dir):
        if e.get("node") == "finalize":
            final_s = e.get("duration_s")
        if e.get("node") != "benchmark":
            continue
        v = e.get("verdict")
        if v in verdicts:
            verdicts[v] += 1
        m = _BAND.search(e.get("summary", ""))
        if m:
            bands.append(float(m.group(1)) / 100)
        m = _NOISE.search(e.get("summary", ""))
        if m:
            noises.append(float(m.group(1)) / 100)
        if e.get("duration_s") is not None:
            seconds.append(float(e["duration_s"]))
    final_noise = None
    try:
        final_noise = json.loads((Path(run_dir) / "result.json").read_text()).get("measured_noise")
    except (OSError, ValueError):
        pass
    return {"races": sum(verdicts.values()), **verdicts,
            "median_band": statistics.median(bands) if bands else None,
            "max_band": max(bands) if bands else None,
            "median_noise": statistics.median(noises) if noises else None,
            "median_race_s": statistics.median(seconds) if seconds else None,
            "final_noise": final_noise, "final_s": final_s}


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
        add("How noisy the machine was for the crew's gate. Over the races of each run: "
            "the band (±) each race reported (the larger of the measured noise and the 10% "
            "minimum speedup; a candidate must be faster by more than its band to be "
            "accepted), the median measured noise and the median seconds per race. Then the "
            "final race (the best kernel against the baseline, after the search): its "
            "measured noise and seconds (with the report written after it). Verdicts: "
            "faster / same / slower.\n")
        add(S.markdown_table(["operator", "races", "median band", "widest band",
                              "median measured noise", "median s per race",
                              "final race: measured noise", "final race s",
                              "faster / same / slower"],
                             [[op, str(n["races"]), _f(n["median_band"], "{:.0%}"),
                               _f(n["max_band"], "{:.0%}"),
                               _f(n.get("median_noise"), "±{:.1%}"),
                               _f(n.get("median_race_s"), "{:.1f}"),
                               _f(n.get("final_noise"), "±{:.1%}"),
                               _f(n.get("final_s"), "{:.1f}"),
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
    finals = [n["final_noise"] for n in data.get("noise", {}).values()
              if n.get("final_noise") is not None]
    if finals:
        med = statistics.median(finals)
        out.append(["median measured noise of the library's final races (15)",
                    f"<= {NOISE_GOAL:.0%}",
                    f"±{med:.1%} over {len(finals)} ops (±{min(finals):.1%} to ±{max(finals):.1%})",
                    status(med <= NOISE_GOAL, f"{(med - NOISE_GOAL) * 100:.1f} points over")])
    return out


SECTION = Section("suite", render, run, goals)
