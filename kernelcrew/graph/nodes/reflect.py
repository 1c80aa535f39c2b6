"""reflect: why each candidate worked or not, into the shared memory; then route."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Literal

from langgraph.runtime import Runtime

from kernelcrew.agents.proposal import Proposal
from kernelcrew.agents.reflector import reflect as write_reflection
from kernelcrew.graph.context import RunContext
from kernelcrew.graph.memory import memory_for
from kernelcrew.graph.nodes.common import budget_spent, ctx_of
from kernelcrew.graph.state import CrewState
from kernelcrew.memory.reflection import Reflection
from kernelcrew.trace import emit

_BOTTLENECKS = {"memory-bound", "compute-bound", "latency-bound", "launch-bound"}


def reflect(state: CrewState, runtime: Runtime[RunContext]) -> dict:
    ctx = ctx_of(runtime)
    it = state["iteration"]
    memory = memory_for(ctx)
    prof = state.get("profile") or {}
    bottleneck = (prof.get("bottleneck") or {}).get("kind", "unknown")
    evidence = (prof.get("bottleneck") or {}).get("evidence", "")
    device = prof.get("metrics", {}).get("device", {}).get("reason", "") if prof else ""
    for e in [e for e in state.get("evaluations", []) if e["iteration"] == it]:
        t0 = time.monotonic()
        prop_file = Path(e["path"]).with_suffix("").with_suffix(".proposal.json")
        plan = ""
        if prop_file.exists():
            plan = Proposal.model_validate_json(prop_file.read_text()).plan
        text = write_reflection(op=state["op_name"], family=state["family"],
                                backend=state["backend"], bottleneck=bottleneck,
                                evidence=evidence, author=e["author"], kind=e["kind"], plan=plan,
                                outcome=e["outcome"], speedup=e.get("speedup"),
                                vs_best=e.get("vs_best"), detail=e.get("detail", ""))
        memory.add(Reflection(
            text=text, operator=state["op_name"], family=state["family"],
            backend=state["backend"], device=device or state["backend"],
            bottleneck=bottleneck if bottleneck in _BOTTLENECKS else "unknown",
            change_kind=e["kind"], author=e["author"], accepted=e["outcome"] == "accepted",
            outcome=e["outcome"],
            speedup=float(e.get("speedup") or 0.0), run_id=state["run_id"], iteration=it))
        emit(state["run_dir"], "reflect", text, t0=t0, iteration=it, agent="reflector",
             about=e["path"], outcome=e["outcome"], text=text, speedup=e.get("speedup"),
             vs_best=e.get("vs_best"), kind=e["kind"], author=e["author"])
    return {"iteration": it + 1}


def route(state: CrewState, runtime: Runtime[RunContext]) -> Literal["observe", "finalize"]:
    """Continue or stop: the guardrails, in order."""
    reason = stop_reason(state, ctx_of(runtime))
    return "finalize" if reason else "observe"


def stop_reason(state: CrewState, ctx: RunContext) -> str:
    done = state["iteration"] - 1
    if state.get("halts"):
        return f"an agent could not continue: {state['halts'][-1]}"
    last = [e for e in state.get("evaluations", []) if e["iteration"] == done]
    if done >= ctx.max_iters:
        return f"max iterations ({ctx.max_iters})"
    if state.get("since_improvement", 0) >= ctx.patience:
        return f"patience: {ctx.patience} iterations without an accepted improvement"
    if budget_spent(state, ctx):
        return budget_spent(state, ctx)
    if not last and not state.get("candidates"):
        return "nothing left to try: no specialist had a new proposal"
    return ""
