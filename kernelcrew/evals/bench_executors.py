"""`make bench`, executors: `kernelcrew eval` with the local executor against Ray with two
local nodes, side by side in one run.

For each executor: the suite's wall time (every operator, from the first crew's start to
the last one's end; on Ray the crews run at once) and the share of the crews' time spent
outside compiling, running and timing kernels (agents, graph, checkpoints, and on Ray the
time a task waits to be placed, for a free node or for a worker to start), from each
run's trace (`measured_span`). The two Ray nodes run on this
machine, one CPU and `cpu_bench: 1` each, so they share its cores: the comparison shows
what the executor costs and what running crews at once gains on one machine, not what a
cluster of machines gains.

    python -m kernelcrew.evals.bench_executors --ops scale_shift_sum softmax_rows
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from dataclasses import asdict
from datetime import datetime
from pathlib import Path
from typing import Any

from kernelcrew.evals import suite as S
from kernelcrew.trace import read_trace

NODE_STORE_BYTES = 80 * 2**20  # object store per node: tasks pass only small objects


def measured_span(run_dir: str, wall_s: float) -> float:
    """Seconds of a run's wall time in which kernels were compiled, run or timed.

    The union of the spans of that work: for an evaluation, the task's own span on the
    node that did it (the trace's `task`: from the start of the work to its end, so the
    time a task waited for a free node, for Ray to place it or for a worker process to
    start is not in it); for the other measuring nodes (baseline, observe, finalize) the
    node's span. Evaluations that run at once on several nodes count once."""
    events = read_trace(run_dir)
    spans = []
    for e in events:
        if e.get("task"):
            spans.append((float(e["task"][0]), float(e["task"][1])))
        elif e.get("node") in S.MEASURE_NODES:
            end = datetime.fromisoformat(e["time"]).timestamp()
            spans.append((end - float(e.get("duration_s") or 0.0), end))
    if not spans:
        return 0.0
    spans.sort()
    total, (lo, hi) = 0.0, spans[0]
    for a, b in spans[1:]:
        if a > hi:
            total, lo, hi = total + hi - lo, a, b
        else:
            hi = max(hi, b)
    return min(wall_s, total + hi - lo)


def _summary(res: S.SuiteResult) -> dict[str, Any]:
    """Wall time and the share outside measuring, over every operator's crew run."""
    tot = {"crew_s": 0.0, "measure_s": 0.0, "overhead_s": 0.0}
    per_op = {}
    for r in res.rows:
        if r.error or not r.run_dir:
            per_op[r.op] = {"error": r.error}
            continue
        m = measured_span(r.run_dir, r.wall_s)
        per_op[r.op] = {"wall_s": r.wall_s, "measure_s": round(m, 1),
                        "overhead_share": (r.wall_s - m) / r.wall_s if r.wall_s else None,
                        "speedup": r.speedup, "correct": r.correct,
                        "evaluations": r.evaluations, "nodes": sorted(_nodes(r.run_dir))}
        tot["crew_s"] += r.wall_s
        tot["measure_s"] += m
        tot["overhead_s"] += r.wall_s - m
    return {"wall_s": res.seconds, **{k: round(v, 1) for k, v in tot.items()},
            "overhead_share": tot["overhead_s"] / tot["crew_s"] if tot["crew_s"] else None,
            "errors": sum(1 for r in res.rows if r.error), "per_op": per_op}


def _nodes(run_dir: str) -> set[str]:
    return {(e.get("ran_on") or {}).get("node", "")[:12] for e in read_trace(run_dir)
            if e.get("node") in ("verify", "benchmark") and e.get("ran_on")}


def compare_executors(ops: list[str], work: Path, say: S.Say, *, budget: int = 2,
                      reps: int = 10, wall_budget_s: float | None = None) -> dict[str, Any]:
    """The same suite twice: local, then on a two-node Ray cluster started here."""
    base = S.EvalSettings(ops=list(ops), budget=budget, reps=reps, memory="off", seed=0,
                          wall_budget_s=wall_budget_s)
    out: dict[str, Any] = {"ops": list(ops), "budget": budget, "reps": reps,
                           "load_start": [round(x, 2) for x in os.getloadavg()]}
    say(f"executors: local suite on {', '.join(ops)}")
    local = S.run_suite(S.EvalSettings(**{**asdict(base), "runs_dir": str(work / "local")}),
                        say=say)
    out["local"] = _summary(local)
    try:
        from ray.cluster_utils import Cluster

        from kernelcrew.tools.executor import ray_cluster
    except ImportError as e:
        out["ray"] = {"error": f"Ray is not installed ({e}): pip install 'kernelcrew[ray]'"}
        return out
    say("executors: starting a two-node Ray cluster here")
    t0 = time.monotonic()
    cluster = Cluster(initialize_head=True, head_node_args={
        "num_cpus": 1, "resources": {"cpu_bench": 1}, "object_store_memory": NODE_STORE_BYTES,
        "include_dashboard": False})
    try:
        cluster.add_node(num_cpus=1, resources={"cpu_bench": 1},
                         object_store_memory=NODE_STORE_BYTES)
        cluster.wait_for_nodes()
        out["ray_start_s"] = round(time.monotonic() - t0, 1)
        say(f"executors: Ray suite on {', '.join(ops)} (crews at once)")
        res = S.run_suite(S.EvalSettings(**{**asdict(base), "runs_dir": str(work / "ray"),
                                            "executor": "ray",
                                            "ray_address": cluster.address}), say=say)
        out["ray"] = _summary(res)
    finally:
        ray_cluster.shutdown()
        cluster.shutdown()
    out["load_end"] = [round(x, 2) for x in os.getloadavg()]
    return out


def render(data: dict[str, Any]) -> str:
    """The Markdown section for docs/results.md."""
    intro = (f"`kernelcrew eval` on {', '.join(data['ops'])} (budget {data['budget']} "
             f"iterations, {data['reps']} reps), the same suite with each executor, one after "
             "the other in one run. Overhead: the crews' time outside compiling, running and "
             "timing kernels (the union of the evaluation tasks' own spans on their nodes and "
             "the baseline, observe and finalize nodes' spans is the measuring time; waiting "
             "for a node is overhead). The two Ray nodes share this machine's cores.\n")
    head = ("| executor | suite wall s | crews' time s | measuring s | overhead share | "
            "runs failed |")
    lines = ["## Executors: local against Ray with two local nodes\n", intro, head,
             "|---|---|---|---|---|---|"]
    for name in ("local", "ray"):
        d = data.get(name) or {}
        if "error" in d:
            lines.append(f"| {name} | not run: {d['error']} | | | | |")
            continue
        share = d.get("overhead_share")
        lines.append(f"| {name} | {d['wall_s']:.0f} | {d['crew_s']:.0f} | {d['measure_s']:.0f} "
                     f"| {f'{share:.0%}' if share is not None else '-'} | {d['errors']} |")
    if "ray_start_s" in data:
        lines.append(f"\nStarting the Ray cluster took {data['ray_start_s']:.1f} s (not in the "
                     "suite's wall time).")
    ray = data.get("ray") or {}
    if ray.get("per_op"):
        lines.append("\nNodes that judged each operator's candidates on Ray: " + "; ".join(
            f"{op}: {len(v.get('nodes', []))}" for op, v in ray["per_op"].items()) + ".")
    lines.append(f"\nLoad average {data.get('load_start')} at the start, {data.get('load_end')} "
                 "at the end: a shared 2-core machine, so the times are noisy.\n")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m kernelcrew.evals.bench_executors",
                                 description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ops", nargs="+", default=["scale_shift_sum", "softmax_rows"])
    ap.add_argument("--budget", type=int, default=2)
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--work-dir", default=None)
    ap.add_argument("--out", help="write the Markdown section here (default: stdout)")
    args = ap.parse_args(argv)
    work = Path(args.work_dir or tempfile.mkdtemp(prefix="kernelcrew-executors-"))

    def say(msg: str) -> None:
        print(f"[executors] {msg}", file=sys.stderr, flush=True)

    data = compare_executors(args.ops, work, say, budget=args.budget, reps=args.reps)
    (work / "executors.json").write_text(json.dumps(data, indent=1, default=str))
    text = render(data)
    if args.out:
        Path(args.out).write_text(text)
    else:
        print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
