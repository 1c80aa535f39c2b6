"""reflect: why each candidate worked or not, into the shared memory; then route."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Literal

from langgraph.runtime import Runtime

from kernelcrew.agents.llm.budget import recorded_spending
from kernelcrew.agents.llm.moves import SETTINGS, not_applicable
from kernelcrew.agents.llm.reflector import LLMReflector, numbers
from kernelcrew.agents.proposal import Proposal
from kernelcrew.agents.reflector import reflect as write_reflection
from kernelcrew.agents.transforms import TRANSFORMS
from kernelcrew.errors import AgentUnavailable
from kernelcrew.graph.context import RunContext
from kernelcrew.graph.memory import memory_for
from kernelcrew.graph.nodes.common import budget_spent, ctx_of, llm_settings, record_answers
from kernelcrew.graph.state import CrewState
from kernelcrew.memory.reflection import Reflection
from kernelcrew.trace import emit

_BOTTLENECKS = {"memory-bound", "compute-bound", "latency-bound", "launch-bound"}


def reflect(state: CrewState, runtime: Runtime[RunContext]) -> dict:
    """One reflection per evaluation of this iteration into the shared memory. What memory
    keeps is built from structured fields (the outcome, the speedups, the prompt-safe
    note, the critic's comparison): later prompts recall it, so it holds neither the
    judge's wording nor an endpoint's error text."""
    ctx = ctx_of(runtime)
    it = state["iteration"]
    memory = memory_for(ctx)
    prof = state.get("profile") or {}
    situation = {"bottleneck": (prof.get("bottleneck") or {}).get("kind", "unknown"),
                 "evidence": (prof.get("bottleneck") or {}).get("evidence", ""),
                 "device": prof.get("metrics", {}).get("device", {}).get("reason", "")
                 if prof else ""}
    llm = LLMReflector(llm_settings(ctx), run_dir=state["run_dir"]) \
        if ctx.policy_for("reflector") == "llm" else None
    out: dict = {"answers": [], "halted": []}
    critiques = {c["path"]: c["text"] for c in state.get("critiques", [])
                 if c["iteration"] == it}
    for e in [e for e in state.get("evaluations", []) if e["iteration"] == it]:
        if e["outcome"] in ("infra-error", "not-run"):
            continue  # the cluster lost it, or nothing was run: no lesson about the kernel
        _reflect_one(state, e, critiques.get(e["path"], ""), situation, llm, memory, out)
    return {"iteration": it + 1, "answers": out["answers"]}


def _reflect_one(state: CrewState, e: dict, critique: str, situation: dict,
                 llm: LLMReflector | None, memory, out: dict) -> None:
    it = state["iteration"]
    t0 = time.monotonic()
    ran_on = e.get("ran_on") or {}
    node = " ".join(x for x in (ran_on.get("host", ""), ran_on.get("node", "")[:16]) if x)
    prop_file = Path(e["path"]).with_suffix("").with_suffix(".proposal.json")
    plan = Proposal.model_validate_json(prop_file.read_text()).plan if prop_file.exists() \
        else ""
    note = e.get("note") or e["outcome"]
    bottleneck, evidence = situation["bottleneck"], situation["evidence"]
    text = write_reflection(op=state["op_name"], family=state["family"],
                            backend=state["backend"], bottleneck=bottleneck,
                            evidence=evidence, author=e["author"], kind=e["kind"], plan=plan,
                            outcome=e["outcome"], speedup=e.get("speedup"),
                            vs_best=e.get("vs_best"), detail=note)
    if critique:
        text += f" Critic: {critique[:400]}"
    by, called, unusable = "heuristic", False, ""
    if llm is not None and not out["halted"]:
        called = True
        facts, measured = reflection_facts(state, e, plan, bottleneck, evidence, critique)
        try:
            said = llm.explain(facts=facts, measured=measured, iteration=it)
        except AgentUnavailable as err:  # the heuristic reflection stands; the run goes on
            said = None
            llm.last_error = str(err)
            out["halted"].append(str(err))
        out["answers"] += record_answers(state["run_dir"], llm, it, "reflect")
        if said:
            text = (f"{e['author']} tried {e['kind']} on {state['op_name']}: "
                    f"{e['outcome']}. {said}")
            by = "llm"
        else:  # why the model's answer was not used: for the trace, never for memory
            unusable = llm.last_error or "no answer"
    bn = bottleneck if bottleneck in _BOTTLENECKS else "unknown"
    unsaved = memory.add(Reflection(
        text=text, operator=state["op_name"], family=state["family"],
        backend=state["backend"], device=situation["device"] or state["backend"], node=node,
        bottleneck=bn, change_kind=e["kind"], author=e["author"],
        accepted=e["outcome"] == "accepted", outcome=e["outcome"],
        speedup=float(e.get("speedup") or 0.0), run_id=state["run_id"], iteration=it,
        candidate=Path(e["path"]).name))
    emit(state["run_dir"], "reflect", text, t0=t0, iteration=it, agent="reflector",
         about=e["path"], outcome=e["outcome"], text=text, speedup=e.get("speedup"),
         vs_best=e.get("vs_best"), kind=e["kind"], author=e["author"], ran_on=ran_on, by=by,
         llm_unusable=unusable or None, memory_unsaved=unsaved or None,
         tokens=llm.last_usage if llm is not None and called else {},
         prompt_file=llm.last_prompt_file if llm is not None and called else None)


def reflection_facts(state: CrewState, e: dict, plan: str, bottleneck: str, evidence: str,
                     critique: str = "") -> tuple[list[str], list[float]]:
    """What the LLM reflector is told, and the measured numbers it must cite."""
    facts = [f"Operator: {state['op_name']} ({state['family']}, {state['backend']}).",
             f"Profile of the kernel it started from: {bottleneck}; {evidence[:300]}",
             f"Change: {e['author']} tried {e['kind']}: {plan[:400]}",
             f"Outcome: {e['outcome']}."]
    measured: list[float] = []
    if e.get("vs_best"):
        facts.append(f"Measured: {e['vs_best']:.3f}x vs the best it raced, side by side.")
        measured.append(round(e["vs_best"], 3))
    if e.get("speedup"):
        facts.append(f"Measured: {e['speedup']:.3f}x over the baseline.")
        measured.append(round(e["speedup"], 3))
    for v in (e.get("groups") or {}).values():
        if v:
            measured.append(round(v, 3))
    note = e.get("note") or ""
    if note and note != e["outcome"]:
        facts.append(f"What happened: {note[:300]}")
        measured += [x for x in numbers(note) if x not in (0.0, 1.0)][:8]
    if critique:
        facts.append(f"The critic: {critique[:500]}")
        measured += [x for x in numbers(critique) if x not in (0.0, 1.0)][:8]
    return facts, measured


def route(state: CrewState, runtime: Runtime[RunContext]) -> Literal["observe", "finalize"]:
    """Continue or stop: the guardrails, in order."""
    reason = stop_reason(state, ctx_of(runtime))
    return "finalize" if reason else "observe"


def unusable_line(answers: list[dict], iteration: int) -> str:
    """'memory_access: 2 malformed, 1 truncated; loop: 2 schema' for one iteration's
    unusable answers ("" when every answer was usable)."""
    per: dict[str, dict[str, int]] = {}
    for a in answers:
        if a.get("iteration") == iteration and a.get("kind") != "usable":
            k = per.setdefault(a.get("agent") or "?", {})
            k[a["kind"]] = k.get(a["kind"], 0) + 1
    return "; ".join(f"{agent}: " + ", ".join(f"{n} {kind}" for kind, n in kinds.items())
                     for agent, kinds in sorted(per.items()))


def budget_reason(state: CrewState, ctx: RunContext) -> str:
    """A budget the run's LLM calls have spent (every agent's calls, the writer's too)."""
    if ctx.token_budget is None and ctx.cost_budget is None:
        return ""
    tokens, usd = recorded_spending(state["run_dir"])
    if ctx.token_budget is not None and tokens >= ctx.token_budget:
        return (f"token budget of {ctx.token_budget} spent ({tokens} tokens used "
                f"by iteration {state['iteration'] - 1})")
    if ctx.cost_budget is not None and usd >= ctx.cost_budget:
        return (f"cost budget of ${ctx.cost_budget:g} spent (${usd:.4f} used by "
                f"iteration {state['iteration'] - 1})")
    return ""


def stop_reason(state: CrewState, ctx: RunContext) -> str:
    done = state["iteration"] - 1
    if state.get("budget_stops"):  # a call that could have gone over a budget was not made
        return state["budget_stops"][-1]
    if state.get("halts"):
        return f"an agent could not continue: {state['halts'][-1]}"
    if state.get("compile_only"):
        # nothing is accepted without a run: one round of proposals, compiled and described
        return f"no device ({state['compile_only']}): candidates compiled, not run"
    last = [e for e in state.get("evaluations", []) if e["iteration"] == done]
    if not last and not state.get("candidates"):
        out = [s for s in state.get("sat_out", []) if s["iteration"] == done]
        if out and not [a for a in state.get("answers", []) if a.get("iteration") == done]:
            return (f"every specialist sat out iteration {done}: their prompts do not fit the "
                    f"model's context ({out[-1]['agent']}: {out[-1]['reason']})")
        bad = unusable_line(state.get("answers", []), done)
        if bad:
            return (f"the agents produced nothing usable in iteration {done}: every answer was "
                    f"unusable ({bad}); see the trace's answer events")
    budget = budget_reason(state, ctx)
    if budget:
        return budget
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
        if any(p["iteration"] == done for p in state.get("proposals", [])):
            return ("nothing left to try: every proposal of iteration "
                    f"{done} was a kernel already evaluated; " + considered(state))
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


ROOFLINE_TRUSTED = 1.0  # above the peak, the peak is not the one this case runs against


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
