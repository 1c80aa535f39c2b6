"""Part 4: the crew's overhead: wall time outside compiling, running and timing kernels, over
every crew run the bench made before this part (issue 4)."""

from __future__ import annotations

from typing import Any

from kernelcrew.evals import suite as S
from kernelcrew.evals.bench.section import BenchRun, Section, fmt, status

OVERHEAD_TARGET = 0.10


def run(b: BenchRun) -> None:
    ov: dict[str, Any] = {}
    tot = {"wall_s": 0.0, "measure_s": 0.0, "agents_s": 0.0, "uncovered_s": 0.0,
           "overhead_s": 0.0}
    for k, r in enumerate(b.runs_for_overhead):
        if r.error or not r.run_dir:
            continue
        o = S.overhead_split(r.run_dir, r.wall_s)
        label = r.op if r.op not in ov else f"{r.op} (run {k + 1})"
        ov[label] = o
        for key in tot:
            tot[key] += o[key]
    if tot["wall_s"]:
        tot["overhead_share"] = tot["overhead_s"] / tot["wall_s"]
        ov["all"] = tot
    b.data["overhead"] = ov


def render(data: dict[str, Any]) -> list[str]:
    L: list[str] = []
    add = L.append
    _f = fmt
    add("## 4. The crew's overhead (issue 4)\n")
    add("Share of a run's wall time spent outside compiling, running and timing kernels. "
        "Method: the trace's per-node durations. Measurement = baseline, observe (it profiles "
        "the best kernel by running it), execute (compile), verify, benchmark, finalize. "
        "Overhead = specialists (the parallel specialists of one iteration counted once, by the "
        "longest), coordinator, gate decision, reflect, revise, plus the wall time no node "
        "covers (graph scheduling, SQLite checkpoints, setup), wall time being measured "
        "around `optimize()`.\n")
    ov = data.get("overhead", {})
    ov_rows = [[op, _f(o["wall_s"], "{:.1f}"), _f(o["measure_s"], "{:.1f}"),
                _f(o["agents_s"], "{:.2f}"), _f(o["uncovered_s"], "{:.2f}"),
                _f(o["overhead_share"], "{:.1%}")] for op, o in ov.items() if op != "all"]
    if "all" in ov:
        o = ov["all"]
        ov_rows.append(["**all runs**", _f(o["wall_s"], "{:.1f}"), _f(o["measure_s"], "{:.1f}"),
                        _f(o["agents_s"], "{:.2f}"), _f(o["uncovered_s"], "{:.2f}"),
                        _f(o["overhead_share"], "{:.1%}")])
    add(S.markdown_table(["run", "wall s", "measuring s", "agents s", "uncovered s",
                          "overhead"], ov_rows))
    add("")
    return L


def goals(data: dict[str, Any]) -> list[list[str]]:
    ov = data.get("overhead", {}).get("all")
    if not (ov and ov.get("overhead_share") is not None):
        return []
    s = ov["overhead_share"]
    return [["crew overhead share of wall time (4)", f"< {OVERHEAD_TARGET:.0%}", f"{s:.1%}",
             status(s < OVERHEAD_TARGET, f"{(s - OVERHEAD_TARGET) * 100:.1f} points over")]]


SECTION = Section("overhead", render, run, goals)
