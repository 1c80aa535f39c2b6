"""reflect: why each candidate worked or not, into the shared memory; then route."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Literal

from langgraph.runtime import Runtime

from kernelcrew.agents.proposal import Proposal
from kernelcrew.agents.reflector import reflect as write_reflection
from kernelcrew.agents.transforms import TRANSFORMS
from kernelcrew.agents.transforms.catalogue import SETTINGS, not_applicable
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
        if e["outcome"] in ("infra-error", "not-run"):
            continue  # the cluster lost it, or nothing was run: no lesson about the kernel
        t0 = time.monotonic()
        ran_on = e.get("ran_on") or {}
        node = " ".join(x for x in (ran_on.get("host", ""), ran_on.get("node", "")[:16]) if x)
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
            backend=state["backend"], device=device or state["backend"], node=node,
            bottleneck=bottleneck if bottleneck in _BOTTLENECKS else "unknown",
            change_kind=e["kind"], author=e["author"], accepted=e["outcome"] == "accepted",
            outcome=e["outcome"],
            speedup=float(e.get("speedup") or 0.0), run_id=state["run_id"], iteration=it))
        emit(state["run_dir"], "reflect", text, t0=t0, iteration=it, agent="reflector",
             about=e["path"], outcome=e["outcome"], text=text, speedup=e.get("speedup"),
             vs_best=e.get("vs_best"), kind=e["kind"], author=e["author"], ran_on=ran_on)
    return {"iteration": it + 1}


def route(state: CrewState, runtime: Runtime[RunContext]) -> Literal["observe", "finalize"]:
    """Continue or stop: the guardrails, in order."""
    reason = stop_reason(state, ctx_of(runtime))
    return "finalize" if reason else "observe"


def stop_reason(state: CrewState, ctx: RunContext) -> str:
    done = state["iteration"] - 1
    if state.get("halts"):
        return f"an agent could not continue: {state['halts'][-1]}"
    if state.get("compile_only"):
        # nothing is accepted without a run: one round of proposals, compiled and described
        return f"no device ({state['compile_only']}): candidates compiled, not run"
    last = [e for e in state.get("evaluations", []) if e["iteration"] == done]
    if done >= ctx.max_iters:
        return f"max iterations ({ctx.max_iters})"
    if state.get("since_improvement", 0) >= ctx.patience:
        return f"patience: {ctx.patience} iterations without an accepted improvement"
    if budget_spent(state, ctx):
        return budget_spent(state, ctx)
    share = _roofline_share(state)
    if share is not None and share > ctx.roofline_done:
        return (f"roofline: the best kernel runs at {share:.0%} of the machine's peak "
                f"(above {ctx.roofline_done:.0%}: little left to gain)")
    if not last and not state.get("candidates"):
        return "nothing left to try: no specialist had a new proposal; " + considered(state)
    return ""


def _roofline_share(state: CrewState) -> float | None:
    """The best kernel's share of the peak (bandwidth or compute, the larger), from the
    profile of the current best; None when the profile has no roofline or is of an older
    best (the profile of the kernel before an accepted change says nothing of it)."""
    prof = state.get("profile") or {}
    roof = prof.get("roofline") or {}
    if Path(str(prof.get("kernel", ""))).name != Path(state["best"]["path"]).name:
        return None
    # above the peak (a case that lives in cache, timed against the DRAM peak) the
    # roofline says nothing about what is left
    shares = [v for v in (roof.get("bandwidth_share"), roof.get("compute_share"))
              if isinstance(v, int | float) and v <= ROOFLINE_TRUSTED]
    return max(shares) if shares else None


ROOFLINE_TRUSTED = 1.1  # a share above this is measured against the wrong peak


def considered(state: CrewState) -> str:
    """Every move of the catalogue, against the best kernel: tried (and how it went),
    applicable but not proposed, or why it does not apply."""
    last: dict[str, str] = {}
    for e in state.get("evaluations", []):
        for part in e["kind"].split("+"):
            last[part.split(":")[0]] = e["outcome"]
    try:
        text = Path(state["best"]["path"]).read_text()
    except OSError:
        return "the best kernel file cannot be read"
    why_not = not_applicable(text)
    items = [f"{k} (tried: {o})" for k, o in last.items()]
    items += [f"{k} (not applicable: {why})" for k, why in why_not.items() if k not in last]
    backend = state.get("backend", "cpu")
    items += [f"{k} (applies; no specialist's evidence called for it)"
              for k, t in TRANSFORMS.items() if backend in t.backends and k not in SETTINGS
              and k not in why_not and k not in last]
    return "moves considered: " + "; ".join(items)
