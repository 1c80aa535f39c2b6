"""Helpers shared by the nodes."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from langgraph.runtime import Runtime

from kernelcrew.graph.context import RunContext
from kernelcrew.trace import write_json_atomic


def ctx_of(runtime: Runtime[RunContext] | None) -> RunContext:
    return RunContext.from_any(runtime.context if runtime is not None else None)


def llm_settings(ctx: RunContext) -> dict[str, Any]:
    """The LLM settings of the run, with its budgets: every agent's calls are held to them."""
    return {**ctx.llm, "token_budget": ctx.token_budget, "cost_budget": ctx.cost_budget}


def kernel_suffix(backend: str) -> str:
    return ".cu" if backend == "cuda" else ".cpp"


def eval_cache(run_dir: str, key: str) -> Path:
    d = Path(run_dir) / "evals"
    d.mkdir(exist_ok=True)
    return d / f"{key}.json"


def load_cached(run_dir: str, key: str) -> dict[str, Any] | None:
    """A finished evaluation from before a kill: reused, never repeated."""
    p = eval_cache(run_dir, key)
    if p.exists():
        try:
            return json.loads(p.read_text())
        except json.JSONDecodeError:
            return None
    return None


def store_cached(run_dir: str, key: str, data: dict[str, Any]) -> None:
    write_json_atomic(eval_cache(run_dir, key), data)


def budget_spent(state: dict, ctx: RunContext) -> str:
    """Why no further evaluation may start (the wall-clock budget is spent), or ""."""
    started = state.get("started")
    if started is not None and time.time() - started > ctx.wall_budget_s:
        return f"wall-clock budget of {ctx.wall_budget_s:.0f} s spent"
    return ""


def baseline_digest(state: dict, tools: Any) -> str:
    path = Path(state["baseline"]["path"])
    return tools.parse(path.read_text(), path=path).digest()


def record_answers(run_dir: str, agent_obj: Any, iteration: int, node: str) -> list[dict]:
    """One trace event per LLM answer an agent got in its last call (usable or not: the
    kind, the step and a short reason), and their compact form for the state."""
    from kernelcrew.trace import append_event, now_iso

    out = []
    for a in getattr(agent_obj, "last_answers", None) or []:
        usage = a.get("usage") or {}
        append_event(run_dir, {
            "time": now_iso(), "duration_s": a.get("seconds") or 0.0, "iteration": iteration,
            "node": "answer", "agent": a.get("agent"), "step": a.get("step"),
            "kind": a.get("kind"), "repair": a.get("repair", False),
            "summary": f"{a.get('agent')} {a.get('step')}: {a.get('kind')}"
                       + (f": {a['reason']}" if a.get("reason") else ""),
            "reason": a.get("reason", ""), "refs": {"record": a["file"]} if a.get("file") else {},
            "tokens": {}, "answer_tokens": usage, "replayed": a.get("replayed", False),
            "via": node, **({"form": a["form"]} if a.get("form") else {})})
        out.append({"agent": a.get("agent"), "step": a.get("step"), "kind": a.get("kind"),
                    "iteration": iteration, "reason": (a.get("reason") or "")[:200],
                    **({"form": a["form"]} if a.get("form") else {})})
    return out
