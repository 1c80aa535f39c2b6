"""The planning nodes: fan-out to the specialists, each specialist, the coordinator."""

from __future__ import annotations

import time
from datetime import datetime
from pathlib import Path

from langgraph.runtime import Runtime
from langgraph.types import Send

from kernelcrew.agents.context import AgentContext
from kernelcrew.agents.contract import redact
from kernelcrew.agents.coordinator import coordinate
from kernelcrew.agents.llm.budget import BudgetSpent
from kernelcrew.agents.llm.client import PromptTooLarge
from kernelcrew.agents.llm.coordinator import LLMCoordinator
from kernelcrew.agents.proposal import Proposal
from kernelcrew.agents.specialist import SpecialistNotFound, get_specialist, specialist_names
from kernelcrew.agents.transforms import apply_change
from kernelcrew.errors import AgentUnavailable
from kernelcrew.graph.agent_view import (
    agent_context,
    crew_compile_errors,
    extent,
    for_specialist,
)
from kernelcrew.graph.context import RunContext
from kernelcrew.graph.nodes.common import ctx_of, kernel_suffix, llm_settings, record_answers
from kernelcrew.graph.services import tools_for
from kernelcrew.graph.state import Candidate, CrewState, ProposalRecord, SpecialistInput
from kernelcrew.kernels.kernelfile import text_digest
from kernelcrew.trace import emit

__all__ = ["agent_context", "coordinator", "extent", "fan_out", "specialist"]

MAX_SUGGESTIONS = 3


def fan_out(state: CrewState, runtime: Runtime[RunContext]) -> list[Send]:
    """One Send per specialist: each gets its own focused input, not the whole state."""
    ctx = ctx_of(runtime)
    names = ctx.specialists or specialist_names(ctx.policy_for("specialists"))
    actx = agent_context(state, ctx)
    plan_first = state.get("plan_first", False)
    errors = crew_compile_errors(state) if plan_first else ""
    return [Send("specialist", SpecialistInput(
        name=n, policy=ctx.policy_for(n),
        context=for_specialist(actx, n, state, errors).model_dump(mode="json"),
        iteration=state["iteration"], plan_first=plan_first, run_dir=state["run_dir"]))
        for n in names]


def suggest(name: str, actx: AgentContext) -> None:
    """What the rule-based specialist of the same field would propose, for an LLM
    specialist to weigh: its moves and plans in `actx.suggestions`, and the moves it
    proposes first in `actx.moves`, marked."""
    try:
        rules = get_specialist(name, "heuristic")
    except SpecialistNotFound:
        return
    try:
        props = rules.propose(actx.model_copy(update={"feedback": None}))
    except Exception:  # noqa: BLE001 - advice only: a rule that fails costs nothing
        return
    actx.suggestions = suggestion_lines(props)
    first = list(dict.fromkeys(p.change.transform for p in props if p.change.transform))
    for m in actx.moves:
        m.suggested = m.name in first
    actx.moves.sort(key=lambda m: (not m.applies, first.index(m.name) if m.name in first
                                   else len(first)))


def suggestion_lines(props: list[Proposal]) -> list[str]:
    out = []
    for p in props[:MAX_SUGGESTIONS]:
        c = p.change
        params = {k: v for k, v in c.params.items() if k != "then"}
        what = f"{c.transform}({', '.join(f'{k}={v}' for k, v in params.items())})" \
            if c.transform else c.kind
        out.append(f"{what}: {p.plan[:240]}")
    return out


def specialist(payload: SpecialistInput, runtime: Runtime[RunContext]) -> dict:
    t0 = time.monotonic()
    ctx = ctx_of(runtime)
    name, it = payload["name"], payload["iteration"]
    agent = get_specialist(name, payload["policy"])
    actx = AgentContext.model_validate(payload["context"])
    actx.run_dir = payload["run_dir"]
    if hasattr(agent, "configure"):  # LLM agents: the run's model, endpoint, method, ...
        agent.configure(llm_settings(ctx))
        suggest(name, actx)
    try:
        if payload["plan_first"] and hasattr(agent, "plan"):
            plan_note = agent.plan(actx) or ""
            emit(payload["run_dir"], "plan", f"{name} re-plans after repeated compile failures: "
                 f"{plan_note[:200]}", t0=t0, iteration=it, agent=name)
        proposals = agent.propose(actx)
    except PromptTooLarge as e:  # this agent sits out; the others go on
        return _sat_out(payload, agent, str(e), t0)
    except BudgetSpent as e:  # the run's budget: a clean stop after this iteration
        emit(payload["run_dir"], "specialist", f"{name}: {e}", t0=t0, iteration=it,
             agent=name, tokens=getattr(agent, "last_usage", None) or {}, budget=True)
        return {"proposals": [], "budget_stops": [str(e)],
                "answers": record_answers(payload["run_dir"], agent, it, "specialist")}
    except AgentUnavailable as e:
        answers = record_answers(payload["run_dir"], agent, it, "specialist")
        emit(payload["run_dir"], "specialist", f"{name} cannot continue: {e}", t0=t0,
             iteration=it, agent=name, tokens=getattr(agent, "last_usage", None) or {},
             prompt_file=getattr(agent, "last_prompt_file", None), halted=True)
        return {"proposals": [], "halts": [f"{name}: {e}"], "answers": answers}
    answers = record_answers(payload["run_dir"], agent, it, "specialist")
    records = _save_proposals(payload["run_dir"], name, it, proposals)
    summary = "; ".join(f"{p.change.kind}"
                        + (f" (moves: {p.change.transform})" if p.change.transform else "")
                        + f": {p.plan[:80]}" for p in proposals) or _nothing(answers)
    emit(payload["run_dir"], "specialist", summary, t0=t0, iteration=it, agent=name,
         refs={f"proposal{k}": r["file"] for k, r in enumerate(records)},
         tokens=getattr(agent, "last_usage", None) or {},
         prompt_file=getattr(agent, "last_prompt_file", None),
         prompt_files=getattr(agent, "last_prompt_files", None),
         context=getattr(agent, "last_context", None), answers=_count(answers))
    return {"proposals": records, "answers": answers}


def _save_proposals(run_dir: str, name: str, it: int, proposals: list[Proposal]
                    ) -> list[ProposalRecord]:
    out_dir = Path(run_dir) / "proposals"
    out_dir.mkdir(exist_ok=True)
    records: list[ProposalRecord] = []
    for k, p in enumerate(proposals):
        f = out_dir / f"iter{it:02d}-{name}-{k}.json"
        f.write_text(p.model_dump_json(indent=1))
        records.append({"iteration": it, "author": name, "file": str(f), "kind": p.change.kind,
                        "expected_gain": p.expected_gain, "confidence": p.confidence})
    return records


def _sat_out(payload: SpecialistInput, agent: object, why: str, t0: float) -> dict:
    name, it = payload["name"], payload["iteration"]
    answers = record_answers(payload["run_dir"], agent, it, "specialist")
    emit(payload["run_dir"], "specialist", f"{name} sits out this iteration: {why}", t0=t0,
         iteration=it, agent=name, tokens=getattr(agent, "last_usage", None) or {},
         prompt_file=getattr(agent, "last_prompt_file", None), sat_out=why)
    return {"proposals": [], "answers": answers,
            "sat_out": [{"iteration": it, "agent": name, "reason": why}]}


def _count(answers: list[dict]) -> dict[str, int]:
    out: dict[str, int] = {}
    for a in answers:
        out[a["kind"]] = out.get(a["kind"], 0) + 1
    return out


def _nothing(answers: list[dict]) -> str:
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
    base_text = Path(state["best"]["path"]).read_text()
    kw = {"stats": state.get("change_stats", {}),
          "apply": lambda p, text: apply_change(p.change, text),
          # an executor with more free machines or devices may take more at once
          "max_candidates": tools_for(state, ctx).executor.candidate_slots(
              ctx.candidates_per_iter),
          "tried_digests": {e["digest"] for e in state.get("evaluations", [])
                            if e.get("digest")}}
    agent = None
    budget_stops: list[str] = []
    if ctx.policy_for("coordinator") == "llm":
        agent = LLMCoordinator(llm_settings(ctx), run_dir=state["run_dir"])
        try:
            prof = state.get("profile") or {}
            decision = agent.coordinate(
                props, base_text, **kw, profile_summary=redact(
                    f"{(prof.get('bottleneck') or {}).get('kind', '')}: "
                    f"{prof.get('summary', '')}", tools_for(state, ctx).spec),
                tried=[f"{e['kind']} by {e['author']}: {e['outcome']}"
                       for e in state.get("evaluations", [])],
                iteration=it, run_dir=state["run_dir"])
        except BudgetSpent as e:  # the budget is the run's: it stops after this iteration
            budget_stops.append(str(e))
            decision = coordinate(props, base_text, **kw)
            decision.reason = f"(LLM coordinator not asked: {e}; heuristic choice) " \
                + decision.reason
        except AgentUnavailable as e:  # the proposals stand: the heuristic one chooses
            decision = coordinate(props, base_text, **kw)
            decision.reason = f"(LLM coordinator unavailable: {e}; heuristic choice) " \
                + decision.reason
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
    candidates = _write_candidates(state, decision.candidates)
    emit(state["run_dir"], "coordinator",
         f"{len(candidates)} candidate(s): {decision.reason}", t0=t0, iteration=it,
         agent="coordinator", decision=decision.reason, rejected=decision.rejected,
         candidates=[c["path"] for c in candidates],
         tokens=getattr(agent, "last_usage", None) or {},
         prompt_file=getattr(agent, "last_prompt_file", None))
    return {"decision": {"reason": decision.reason, "rejected": decision.rejected,
                         "merged_from": decision.merged_from}, "candidates": candidates,
            "budget_stops": budget_stops, "answers": answers}


def _write_candidates(state: CrewState, chosen: list[Proposal]) -> list[Candidate]:
    it = state["iteration"]
    cand_dir = Path(state["run_dir"]) / "candidates"
    stamp = datetime.now().strftime("%H%M%S")
    suffix = kernel_suffix(state["backend"])
    candidates: list[Candidate] = []
    for k, p in enumerate(chosen):
        author = p.author.replace("+", "_")
        path = cand_dir / f"iter{it:02d}-{k}-{author}-{stamp}{suffix}"
        path.write_text(p.change.kernel)
        pfile = cand_dir / f"{path.stem}.proposal.json"
        pfile.write_text(p.model_dump_json(indent=1))
        candidates.append({"path": str(path), "author": p.author, "kind": p.change.kind,
                           "proposal": str(pfile), "tries": 0, "replans": 0,
                           "status": "pending", "digest": text_digest(p.change.kernel)})
    return candidates
