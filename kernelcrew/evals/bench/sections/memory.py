"""Part 3: memory benefit: two library ops of one family, the second run with the first's
memory and from an empty store (issue 6)."""

from __future__ import annotations

import json
import shutil
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from kernelcrew.evals import suite as S
from kernelcrew.evals.bench.section import BenchRun, Progress, Section, fmt, status
from kernelcrew.kernels.spec import load_op
from kernelcrew.trace import read_trace

MEMORY_PAIR = ("softmax_rows", "scale_shift_sum")  # both `family: reduction` in the library


@dataclass
class MemoryRun:
    label: str
    row: S.OpRow
    final_speedup: float | None
    evals_to_final: int | None
    evals_to_common: int | None = None
    recalled: int = 0  # reflections recalled over the run (observe events)
    trajectory: list[tuple[int, float, str]] = field(default_factory=list)



def memory_benefit(rows: dict[str, S.OpRow], settings: S.EvalSettings, work: Path,
                   say: Progress) -> list[MemoryRun] | str:
    a_name, b_name = MEMORY_PAIR
    fams = {load_op(n).family for n in MEMORY_PAIR}
    if len(fams) != 1:
        return f"{a_name} and {b_name} are not of one family ({sorted(fams)})"
    a, b_empty = rows.get(a_name), rows.get(b_name)
    if not a or not b_empty or a.error or b_empty.error or not a.memory_dir:
        return "the suite runs of the pair failed or ran without memory"
    store = work / "memory-from-A"
    shutil.copytree(a.memory_dir, store)
    say(f"memory benefit: {b_name} with the memory of {a_name}'s run")
    mem_settings = S.EvalSettings(**{**asdict(settings), "memory": "shared",
                                     "memory_dir": str(store)})
    b_mem = S.run_operator(b_name, mem_settings, work / "runs", memory_dir=str(store), say=say)
    out = []
    for label, row in ((f"{b_name} with {a_name}'s memory", b_mem),
                       (f"{b_name} from an empty store", b_empty)):
        if row.error:
            return f"{label}: {row.error}"
        result = json.loads((Path(row.run_dir) / "result.json").read_text())
        traj = S.accepted_trajectory(row.run_dir, result)
        final = traj[-1][1] if traj else 1.0
        recalled = sum(len(e.get("reflections") or [])
                       for e in read_trace(row.run_dir) if e.get("node") == "observe")
        out.append(MemoryRun(label, row, final, traj[-1][0] if traj else 0, recalled=recalled,
                             trajectory=traj))
    common = min(m.final_speedup or 1.0 for m in out)
    for m in out:
        m.evals_to_common = S.evals_to_reach(m.trajectory, common)
    return out


def run(b: BenchRun) -> None:
    suite = b.data.get("suite")
    rows = {r.op: r for r in suite.rows} if suite else {}
    if not all(n in rows for n in MEMORY_PAIR):
        return
    b.say("part 3: memory benefit")
    b.data["memory"] = memory_benefit(rows, b.settings, b.work, b.say)
    if isinstance(b.data["memory"], list):
        b.runs_for_overhead.append(b.data["memory"][0].row)


def render(data: dict[str, Any]) -> list[str]:
    L: list[str] = []
    add = L.append
    _f = fmt
    add("## 3. Memory benefit (issue 6)\n")
    mem = data.get("memory")
    if isinstance(mem, str):
        add(f"Not measured: {mem}.\n")
    elif mem:
        a_name, b_name = MEMORY_PAIR
        add(f"`{a_name}` and `{b_name}` are both `family: reduction` in the library. `{a_name}` "
            f"ran first (part 1) into an empty store; `{b_name}` then ran once with a copy of "
            "that store and once from an empty store (its part-1 run); same seed and budget. "
            "*evals to final* counts the candidates evaluated up to the end of the iteration "
            "in which the run's final best was accepted (the gate races every candidate of an "
            "iteration before it chooses; 0: nothing was accepted); *evals to common* the same "
            "up to the iteration that reached the lower of the two runs' best chained "
            "speedups. What memory changes: the coordinator weighs each kind of change by its "
            "record in the family and backend, and evaluates no hedge candidate beside a merge "
            "whose every part helped before and never failed (a merge with some proven parts "
            "gets one hedge, the merge of those parts); the run's `coordinator` trace events "
            "say which.\n")
        add(S.markdown_table(["run", "final race speedup", "best chained speedup",
                              "evals to final", "evals to common", "evals in all",
                              "wall s", "reflections recalled", "stop"],
                             [[m.label, _f(m.row.speedup, "{:.2f}x"),
                               _f(m.final_speedup, "{:.2f}x"), _f(m.evals_to_final),
                               _f(m.evals_to_common), str(m.row.evaluations),
                               _f(m.row.wall_s, "{:.0f}"), str(m.recalled),
                               m.row.stop_reason[:45]] for m in mem]))
        add("\n*final race speedup*: the best kernel raced against the baseline at the end; "
            "*best chained speedup*: the product of the accepted candidates' wins over the "
            "incumbent when they were accepted (what the crew saw during the run, and what "
            "*evals to common* compares).\n")
        add("")
    return L


def goals(data: dict[str, Any]) -> list[list[str]]:
    mem = data.get("memory")
    if not (isinstance(mem, list) and len(mem) == 2):
        return []
    w, wo = mem
    a, b = w.evals_to_common, wo.evals_to_common
    ok = a is not None and (b is None or a < b)
    return [["with memory, fewer evaluations to the (common) speedup (6)",
             "fewer than from an empty store", f"{fmt(a)} vs {fmt(b)}",
             status(ok, "not fewer" if a is not None else "not reached")]]


SECTION = Section("memory", render, run, goals, needs=("suite",))
