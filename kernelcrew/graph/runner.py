"""Run the crew durably: a SQLite checkpointer in the run directory, resume by run id."""

from __future__ import annotations

import json
import sqlite3
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.types import Command

from kernelcrew.errors import InputError
from kernelcrew.graph.build import RECURSION_LIMIT, build_graph
from kernelcrew.graph.context import RunContext, runs_root
from kernelcrew.graph.nodes.setup import new_run_id
from kernelcrew.kernels.spec import load_op
from kernelcrew.trace import append_event, now_iso, read_trace

Approver = Callable[[dict], bool]
Progress = Callable[[dict], None]


def find_run(ref: str, runs_dir: str | None = None) -> Path:
    p = Path(ref)
    if (p / "context.json").exists():
        return p.resolve()
    cand = Path(runs_dir or runs_root()) / ref
    if (cand / "context.json").exists():
        return cand
    raise InputError(f"no run {ref!r} under {runs_dir or runs_root()}; give a run id from "
                     "`kernelcrew runs` or a run directory")


def _drive(graph: Any, first: Any, config: dict, ctx: RunContext, run_dir: Path,
           progress: Progress | None, approver: Approver | None) -> dict:
    try:
        return _drive_inner(graph, first, config, ctx, run_dir, progress, approver)
    except Exception as e:  # recorded for `kernelcrew runs`, then raised as it was
        if run_dir.exists():
            append_event(run_dir, {"time": now_iso(), "node": "error", "iteration": None,
                                   "summary": f"{type(e).__name__}: {e}"[:300]})
        raise


def _drive_inner(graph: Any, first: Any, config: dict, ctx: RunContext, run_dir: Path,
                 progress: Progress | None, approver: Approver | None) -> dict:
    seen = len(read_trace(run_dir))
    payload = first
    while True:
        interrupted = None
        for chunk in graph.stream(payload, config, context=ctx, stream_mode="updates"):
            if "__interrupt__" in chunk:
                interrupted = chunk["__interrupt__"][0].value
            if progress:
                events = read_trace(run_dir)
                for e in events[seen:]:
                    progress(e)
                seen = len(events)
        if interrupted is None:
            break
        if approver is None:
            raise InputError("--approve needs a terminal to ask on")
        payload = Command(resume=approver(interrupted))
    state = graph.get_state(config).values
    return state.get("result") or {}


def optimize(operator: str, ctx: RunContext, *, progress: Progress | None = None,
             approver: Approver | None = None, run_id: str | None = None) -> dict:
    spec = load_op(operator)
    run_id = run_id or new_run_id(spec.name)
    run_dir = Path(ctx.run_dir) if ctx.run_dir else Path(ctx.runs_dir or runs_root()) / run_id
    run_dir.mkdir(parents=True, exist_ok=True)
    ctx.run_dir = str(run_dir)
    conn = sqlite3.connect(run_dir / "checkpoints.sqlite", check_same_thread=False)
    try:
        graph = build_graph(checkpointer=SqliteSaver(conn))
        config = {"configurable": {"thread_id": run_id}, "recursion_limit": RECURSION_LIMIT}
        return _drive(graph, {"operator": str(spec.folder), "run_id": run_id}, config, ctx,
                      run_dir, progress, approver)
    finally:
        conn.close()


def resume(ref: str, *, runs_dir: str | None = None, progress: Progress | None = None,
           approver: Approver | None = None, overrides: dict | None = None) -> dict:
    """Continue a run that was killed; finished evaluations are not repeated."""
    run_dir = find_run(ref, runs_dir)
    saved = json.loads((run_dir / "context.json").read_text())
    ctx = RunContext.from_any({**saved, **(overrides or {}), "run_dir": str(run_dir)})
    run_id = saved["run_id"]
    conn = sqlite3.connect(run_dir / "checkpoints.sqlite", check_same_thread=False)
    try:
        graph = build_graph(checkpointer=SqliteSaver(conn))
        config = {"configurable": {"thread_id": run_id}, "recursion_limit": RECURSION_LIMIT}
        snapshot = graph.get_state(config)
        if not snapshot.next and snapshot.values.get("result"):
            return snapshot.values["result"]  # already finished
        first = None if snapshot.values else {"operator": saved["operator"], "run_id": run_id}
        return _drive(graph, first, config, ctx, run_dir, progress, approver)
    finally:
        conn.close()


def replay(ref: str, *, live: bool = False, overrides: dict | None = None,
           runs_dir: str | None = None, progress: Progress | None = None,
           approver: Approver | None = None) -> dict:
    """Run a recorded run again, each LLM request answered from its recording (agent, step
    and prompt; numbers in prompts are measured again and do not count). A request with no
    recorded answer is reported with its difference from the nearest recorded prompt, then
    stops the run cleanly, or (`live`) goes to the endpoint. A new run directory is made."""
    src = find_run(ref, runs_dir)
    saved = json.loads((src / "context.json").read_text())
    over = dict(overrides or {})
    llm = {**saved.get("llm", {}), **over.pop("llm", {}), "replay": str(src),
           "replay_missing": "live" if live else "stop"}
    fields = {k: v for k, v in saved.items() if k not in ("run_id", "run_dir", "operator",
                                                         "requested_backend")}
    ctx = RunContext.from_any({**fields, "backend": saved.get("requested_backend")
                               or saved.get("backend", "auto"), **over, "llm": llm})
    return optimize(saved["operator"], ctx, progress=progress, approver=approver)


def ask_on_terminal(payload: dict) -> bool:
    print(f"\n{payload.get('question')}", file=sys.stderr)
    for r in payload.get("rows", [])[:12]:
        print(f"  {r['group']:<9} {r['case']:<28} {r.get('speedup') or 0:.2f}x", file=sys.stderr)
    return input("accept? [y/N] ").strip().lower() in ("y", "yes")
