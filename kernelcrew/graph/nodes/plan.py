"""The planning nodes: fan-out to the specialists, each specialist, the coordinator."""

from __future__ import annotations

import re
import time
from datetime import datetime
from pathlib import Path

from langgraph.runtime import Runtime
from langgraph.types import Send

from kernelcrew.agents.context import AgentContext
from kernelcrew.agents.coordinator import coordinate
from kernelcrew.agents.llm.coordinator import LLMCoordinator
from kernelcrew.agents.proposal import Proposal
from kernelcrew.agents.specialist import get_specialist, specialist_names
from kernelcrew.agents.transforms import apply_change
from kernelcrew.errors import AgentUnavailable
from kernelcrew.graph.context import RunContext
from kernelcrew.graph.nodes.common import ctx_of, kernel_suffix, record_answers
from kernelcrew.graph.nodes.observe import fold_history
from kernelcrew.graph.services import tools_for
from kernelcrew.graph.state import CrewState, SpecialistInput
from kernelcrew.kernels.kernelfile import text_digest
from kernelcrew.kernels.signature import entry_params
from kernelcrew.results import ProfileResult
from kernelcrew.trace import emit


def extent(shape: list[str | int]) -> str:
    """The element count of an array of this shape, as a C expression in the sizes."""
    dims = [str(d).strip() for d in shape] or ["1"]
    return " * ".join(d if re.fullmatch(r"\w+", d) else f"({d})" for d in dims)


def agent_context(state: CrewState, ctx: RunContext) -> AgentContext:
    tools = tools_for(state, ctx)
    spec = tools.spec
    recent, tried = fold_history(state.get("evaluations", []), state["iteration"])
    sig = ", ".join(f"{n} ({k})" for n, k in spec.signature())
    best_text = Path(state["best"]["path"]).read_text()
    return AgentContext(
        op=spec.name, family=spec.family, description=spec.description,
        backend=state["backend"], signature=sig,
        tolerance=f"rtol={spec.tolerance.rtol:g}, atol={spec.tolerance.atol:g}",
        kernel=best_text, kernel_is_baseline=state["best"]["author"] == "baseline",
        profile=ProfileResult.model_validate(state["profile"]) if state.get("profile") else None,
        recent=recent, tried=tried, reflections=state.get("reflections", []),
        change_stats=state.get("change_stats", {}), iteration=state["iteration"],
        entry_params=entry_params(spec) if state["backend"] != "cuda" else [],
        extents={name: extent(ts.shape) for name, ts in {**spec.inputs, **spec.outputs}.items()},
        compile_report=(state.get("profile") or {}).get("compile_report", ""))


def fan_out(state: CrewState, runtime: Runtime[RunContext]) -> list[Send]:
    """One Send per specialist: each gets its own focused input, not the whole state."""
    ctx = ctx_of(runtime)
    names = ctx.specialists or specialist_names(ctx.policy_for("specialists"))
    actx = agent_context(state, ctx).model_dump(mode="json")
    return [Send("specialist", SpecialistInput(
        name=n, policy=ctx.policy_for(n), context=actx, iteration=state["iteration"],
        plan_first=state.get("plan_first", False), run_dir=state["run_dir"])) for n in names]


def specialist(payload: SpecialistInput, runtime: Runtime[RunContext]) -> dict:
    t0 = time.monotonic()
    name, it = payload["name"], payload["iteration"]
    agent = get_specialist(name, payload["policy"])
    if hasattr(agent, "configure"):  # LLM agents: the run's model, endpoint, method, ...
        agent.configure(ctx_of(runtime).llm)
    actx = AgentContext.model_validate(payload["context"])
    if "run_dir" in AgentContext.model_fields:
        actx.run_dir = payload["run_dir"]
    try:
        if payload["plan_first"] and hasattr(agent, "plan"):
            plan_note = agent.plan(actx) or ""
            emit(payload["run_dir"], "plan", f"{name} re-plans after repeated compile failures: "
                 f"{plan_note[:200]}", t0=t0, iteration=it, agent=name)
        proposals = agent.propose(actx)
    except AgentUnavailable as e:
        answers = record_answers(payload["run_dir"], agent, it, "specialist")
        emit(payload["run_dir"], "specialist", f"{name} cannot continue: {e}", t0=t0,
             iteration=it, agent=name, tokens=getattr(agent, "last_usage", None) or {},
             prompt_file=getattr(agent, "last_prompt_file", None), halted=True)
        return {"proposals": [], "halts": [f"{name}: {e}"], "answers": answers}
    answers = record_answers(payload["run_dir"], agent, it, "specialist")
    out_dir = Path(payload["run_dir"]) / "proposals"
    out_dir.mkdir(exist_ok=True)
    records = []
    for k, p in enumerate(proposals):
        f = out_dir / f"iter{it:02d}-{name}-{k}.json"
        f.write_text(p.model_dump_json(indent=1))
        records.append({"iteration": it, "author": name, "file": str(f), "kind": p.change.kind,
                        "expected_gain": p.expected_gain, "confidence": p.confidence})
    tokens = getattr(agent, "last_usage", None) or {}
    summary = "; ".join(f"{p.change.kind} (x{p.expected_gain:.2f}, conf {p.confidence:.1f}): "
                        f"{p.plan[:80]}" for p in proposals) or _nothing(answers, agent)
    emit(payload["run_dir"], "specialist", summary, t0=t0, iteration=it, agent=name,
         refs={f"proposal{k}": r["file"] for k, r in enumerate(records)}, tokens=tokens,
         prompt_file=getattr(agent, "last_prompt_file", None),
         prompt_files=getattr(agent, "last_prompt_files", None),
         context=getattr(agent, "last_context", None),
         answers=_count(answers))
    return {"proposals": records, "answers": answers}


def _count(answers: list[dict]) -> dict[str, int]:
    out: dict[str, int] = {}
    for a in answers:
        out[a["kind"]] = out.get(a["kind"], 0) + 1
    return out


def _nothing(answers: list[dict], agent: object) -> str:
    """Why a specialist has no proposal: its answers were unusable, or it had none."""
    bad = [a for a in answers if a["kind"] != "usable"]
    if not bad:
        return "nothing to propose"
    counts = ", ".join(f"{n} {k}" for k, n in _count(bad).items())
    last = bad[-1]
    return (f"no usable answer ({counts}); last, at {last['step']}: {last['reason']}")


def coordinator(state: CrewState, runtime: Runtime[RunContext]) -> dict:
    t0 = time.monotonic()
    ctx = ctx_of(runtime)
    it = state["iteration"]
    props = [Proposal.model_validate_json(Path(r["file"]).read_text())
             for r in state.get("proposals", []) if r["iteration"] == it]

    tried = {e["digest"] for e in state.get("evaluations", []) if e.get("digest")}
    base_text = Path(state["best"]["path"]).read_text()
    kw = {"stats": state.get("change_stats", {}),
              "apply": lambda p, text: apply_change(p.change, text),
              # an executor with more free machines or devices may take more at once
              "max_candidates": tools_for(state, ctx).executor.candidate_slots(
                  ctx.candidates_per_iter),
              "tried_digests": tried}
    agent = None
    halts: list[str] = []
    if ctx.policy_for("coordinator") == "llm":
        agent = LLMCoordinator(ctx.llm, run_dir=state["run_dir"])
        try:
            decision = agent.coordinate(
                props, base_text, **kw, profile_summary=(state.get("profile") or {}).get(
                    "summary", ""), tried=[f"{e['kind']} by {e['author']}: {e['outcome']}"
                                           for e in state.get("evaluations", [])],
                iteration=it, run_dir=state["run_dir"])
        except AgentUnavailable as e:
            halts.append(f"coordinator: {e}")
            decision = coordinate([], base_text, **kw)
    else:
        decision = coordinate(props, base_text, **kw)
    answers = record_answers(state["run_dir"], agent, it, "coordinator") if agent else []
    if not props:
        bad = [a for a in state.get("answers", []) if a["iteration"] == it
               and a["kind"] != "usable"]
        if bad:
            who = sorted({a["agent"] for a in bad})
            decision.reason = (f"no proposals: the specialists' answers were unusable "
                               f"({len(bad)} unusable answer(s) from {', '.join(who)})")
    cand_dir = Path(state["run_dir"]) / "candidates"
    stamp = datetime.now().strftime("%H%M%S")
    suffix = kernel_suffix(state["backend"])
    candidates = []
    for k, p in enumerate(decision.candidates):
        author = p.author.replace("+", "_")
        path = cand_dir / f"iter{it:02d}-{k}-{author}-{stamp}{suffix}"
        path.write_text(p.change.kernel)
        pfile = cand_dir / f"{path.stem}.proposal.json"
        pfile.write_text(p.model_dump_json(indent=1))
        candidates.append({"path": str(path), "author": p.author, "kind": p.change.kind,
                           "proposal": str(pfile), "tries": 0, "status": "pending",
                           "digest": text_digest(p.change.kernel)})
    emit(state["run_dir"], "coordinator",
         f"{len(candidates)} candidate(s): {decision.reason}", t0=t0, iteration=it,
         agent="coordinator", decision=decision.reason, rejected=decision.rejected,
         candidates=[c["path"] for c in candidates],
         tokens=getattr(agent, "last_usage", None) or {},
         prompt_file=getattr(agent, "last_prompt_file", None))
    return {"decision": {"reason": decision.reason, "rejected": decision.rejected,
                         "merged_from": decision.merged_from}, "candidates": candidates,
            "halts": halts, "answers": answers}
