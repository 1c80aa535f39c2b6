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
