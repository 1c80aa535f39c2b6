"""execute: compile each candidate; a compile error goes back to its author (revise).

Each candidate gets `max_compile_tries` compiles under its plan; after that its author
re-plans it once (a new plan, then code, with the errors in hand) and gets as many
compiles again before it is abandoned. Across the crew, that many failures in a row with
no candidate compiling make the next iteration plan first; the first candidate that
compiles resets it.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Literal

from langgraph.runtime import Runtime
from langgraph.types import Command

from kernelcrew.agents.context import Feedback
from kernelcrew.agents.llm.budget import BudgetSpent
from kernelcrew.agents.llm.client import PromptTooLarge
from kernelcrew.agents.proposal import Proposal
from kernelcrew.agents.specialist import get_specialist
from kernelcrew.errors import AgentUnavailable, InputError
from kernelcrew.graph.agent_view import agent_context
from kernelcrew.graph.context import RunContext
from kernelcrew.graph.feedback import compile_feedback, compile_note
from kernelcrew.graph.nodes.common import ctx_of, llm_settings, record_answers
from kernelcrew.graph.services import tools_for
from kernelcrew.graph.state import Candidate, CrewState, Evaluation
from kernelcrew.kernels.kernelfile import text_digest, validate_against
from kernelcrew.kernels.signature import check_entry, entry_params
from kernelcrew.results import CompileResult
from kernelcrew.tools.executor import EvalResult
from kernelcrew.tools.executor import Evaluation as Job
from kernelcrew.trace import emit

MAX_REPLANS = 1  # re-plans of one candidate after repeated compile errors


def compile_candidate(state: CrewState, ctx: RunContext, text: str, path: str) -> CompileResult:
    """Front matter and policy problems are compile errors the author can read."""
    tools = tools_for(state, ctx)
    try:
        kf = tools.parse(text, path=Path(path))
        validate_against(kf, tools.spec)
    except InputError as e:
        return CompileResult(ok=False, reason=f"invalid kernel file: {e}")
    if state["backend"] != "cuda" and kf.meta.entry:
        # the harness calls the entry with op.yaml's arguments: another list would read
        # garbage, so it is an error the author can read, before any compiler runs
        why = check_entry(kf.body, kf.meta.entry, entry_params(tools.spec))
        if why:
            return CompileResult(ok=False, reason=f"wrong entry signature: {why}")
    return tools.bench.compile_text(text, path)


def _after_failure(c: Candidate, max_tries: int) -> str:
    """The status of a candidate whose compile just failed: fix it, re-plan it, or
    abandon it."""
    since = c["tries"] - c.get("replans", 0) * max_tries  # compiles under this plan
    if since < max_tries:
        return "compile-error"
    if c.get("replans", 0) < MAX_REPLANS:
        c["replan"] = True
        return "compile-error"
    return "abandoned"


def execute(state: CrewState, runtime: Runtime[RunContext]
            ) -> Command[Literal["revise", "verify"]]:
    ctx = ctx_of(runtime)
    it = state["iteration"]
    candidates: list[Candidate] = [dict(c) for c in state.get("candidates", [])]  # type: ignore[misc]
    counts = {"failures": state.get("compile_failures", 0), "compiled": 0}
    tools = tools_for(state, ctx)
    todo = {f"compile-{i}-{c['digest']}": c for i, c in enumerate(candidates)
            if c["status"] == "pending"}
    clock = [time.monotonic()]

    def compiled(r: EvalResult) -> None:  # each compile as it lands (in parallel on Ray)
        _on_compiled(state, ctx, todo[r.key], r, counts, clock)

    tools.executor.evaluate([Job(key=k, stage="compile", kernel=Path(c["path"]).read_text(),
                                 path=c["path"]) for k, c in todo.items()],
                            on_result=compiled)
    update = {"candidates": candidates, "compile_failures": counts["failures"],
              "evaluations": _given_up(candidates, it)}
    if counts["compiled"]:
        update["plan_first"] = False  # the crew writes code that builds again
    elif counts["failures"] >= ctx.max_compile_tries:
        update["plan_first"] = True
    goto = "revise" if any(c["status"] == "compile-error" for c in candidates) else "verify"
    return Command(goto=goto, update=update)


def _on_compiled(state: CrewState, ctx: RunContext, c: Candidate, r: EvalResult,
                 counts: dict[str, int], clock: list[float]) -> None:
    it = state["iteration"]
    where = r.trace_fields()
    t0, clock[0] = clock[0], time.monotonic()
    if r.infra_error:  # no verdict on the kernel: it goes back to pending next time
        c["status"] = "infra-error"
        c["infra_error"] = r.infra_error
        emit(state["run_dir"], "execute", f"{Path(c['path']).name} not compiled: "
             f"{r.infra_error[:200]}", t0=t0, iteration=it, agent=c["author"],
             refs={"kernel": c["path"]}, ok=None, infra_error=r.infra_error, **where)
        return
    comp = r.compile
    assert comp is not None
    c["tries"] += 1
    if comp.ok:
        c["status"] = "compiled"
        counts["failures"] = 0
        counts["compiled"] += 1
        res = ", ".join(f"{x.kernel}: {x.registers} regs" for x in comp.resources)
        emit(state["run_dir"], "execute", f"compiled {Path(c['path']).name} in "
             f"{comp.seconds:.1f} s{' (cached)' if comp.cached else ''} {res}", t0=t0,
             iteration=it, agent=c["author"], refs={"kernel": c["path"]}, ok=True, **where)
        return
    counts["failures"] += 1
    fb = compile_feedback(comp)
    err_file = Path(c["path"]).with_suffix(".errors.txt")
    err_file.write_text(fb)
    c["feedback"] = str(err_file)
    c["status"] = _after_failure(c, ctx.max_compile_tries)  # type: ignore[typeddict-item]
    since = c["tries"] - c.get("replans", 0) * ctx.max_compile_tries
    then = "; its author re-plans it" if c.get("replan") else \
        "; abandoned" if c["status"] == "abandoned" else ""
    emit(state["run_dir"], "execute", f"compile error in {Path(c['path']).name} (try "
         f"{since}/{ctx.max_compile_tries}{then}): {compile_note(fb)[:160]}", t0=t0,
         iteration=it, agent=c["author"], refs={"kernel": c["path"], "errors": str(err_file)},
         ok=False, messages=[m.model_dump() for m in comp.messages[:5]], **where)


def _given_up(candidates: list[Candidate], it: int) -> list[Evaluation]:
    """Evaluations for candidates abandoned or lost by the cluster, once each."""
    out: list[Evaluation] = []
    for c in candidates:
        if c.get("recorded") or c["status"] not in ("abandoned", "infra-error"):
            continue
        c["recorded"] = True
        base: Evaluation = {"iteration": it, "author": c["author"], "kind": c["kind"],
                            "path": c["path"], "digest": c["digest"], "speedup": None,
                            "vs_best": None, "compile_tries": c["tries"]}
        if c["status"] == "infra-error":  # the cluster lost it: no verdict
            out.append({**base, "outcome": "infra-error", "detail": c["infra_error"][:200],
                        "note": "not evaluated (an infrastructure error, no verdict)"})
            continue
        wrong = c.get("wrong")  # a wrong result whose fix was given up
        if wrong:
            out.append({**base, "outcome": "rejected", "detail": wrong,
                        "note": c.get("wrong_note") or "wrong result; the fix was given up"})
            continue
        text = Path(c["feedback"]).read_text() if c.get("feedback") else ""
        note = compile_note(text) if text else "did not compile"
        out.append({**base, "outcome": "compile-error", "detail": note,
                    "note": f"did not compile after {c['tries']} tries: {note}"})
    return out


def revise(state: CrewState, runtime: Runtime[RunContext]) -> dict:
    """Each failed candidate goes back to its author with the normalized errors."""
    ctx = ctx_of(runtime)
    candidates: list[Candidate] = [dict(c) for c in state["candidates"]]  # type: ignore[misc]
    out: dict = {"candidates": candidates, "halts": [], "answers": [], "sat_out": [],
                 "budget_stops": []}
    for c in candidates:
        if c["status"] in ("compile-error", "incorrect"):
            _revise_one(state, ctx, c, candidates, out)
    return out


def _feedback(c: Candidate, ctx: RunContext, state: CrewState) -> Feedback:
    wrong = c["status"] == "incorrect"
    since = c["tries"] - c.get("replans", 0) * ctx.max_compile_tries
    return Feedback(kind="incorrect" if wrong else "compile-error",
                    message=Path(c["feedback"]).read_text(),
                    attempt=1 if wrong else max(1, since),
                    replan=bool(c.get("replan")) and not wrong)


def _revise_one(state: CrewState, ctx: RunContext, c: Candidate, candidates: list[Candidate],
                out: dict) -> None:
    it = state["iteration"]
    t0 = time.monotonic()
    failed = Proposal.model_validate_json(Path(c["proposal"]).read_text())
    actx = agent_context(state, ctx)
    actx.feedback = _feedback(c, ctx, state)
    actx.run_dir = state["run_dir"]
    wrong = c["status"] == "incorrect"
    replan = actx.feedback.replan
    author = c["author"].split("+")[0]
    agent = get_specialist(author, ctx.policy_for(author))
    if hasattr(agent, "configure"):
        agent.configure(llm_settings(ctx))
    usage = lambda: getattr(agent, "last_usage", None) or {}
    try:
        new = agent.revise(actx, failed)
    except PromptTooLarge as e:  # this candidate is given up; the crew goes on
        new = None
        out["sat_out"].append({"iteration": it, "agent": author, "reason": str(e)})
        emit(state["run_dir"], "revise", f"{author} sits out the revision: {e}", t0=t0,
             iteration=it, agent=author, tokens=usage(), sat_out=str(e))
    except BudgetSpent as e:  # the run's budget: a clean stop after this iteration
        new = None
        out["budget_stops"].append(str(e))
        emit(state["run_dir"], "revise", f"{author}: {e}", t0=t0, iteration=it,
             agent=author, tokens=usage(), budget=True)
    except AgentUnavailable as e:
        new = None
        out["halts"].append(f"{author}: {e}")
        emit(state["run_dir"], "revise", f"{author} cannot continue: {e}", t0=t0,
             iteration=it, agent=author, halted=True, tokens=usage())
    out["answers"] += record_answers(state["run_dir"], agent, it, "revise")
    if new is None:
        c["status"] = "abandoned"
        why = getattr(agent, "last_error", None)
        what = "a wrong result" if wrong else f"{c['tries']} compile error(s)"
        emit(state["run_dir"], "revise", f"{author} gives up on {c['kind']} after {what}"
             + (f": {why}" if why else ""), t0=t0, iteration=it, agent=author,
             tokens=usage(), prompt_file=getattr(agent, "last_prompt_file", None))
        return
    digest = text_digest(new.change.kernel)
    others = {o["digest"] for o in candidates if o is not c and o["status"] != "abandoned"}
    others |= {e.get("digest") for e in state.get("evaluations", [])}
    if digest in others:
        # the revision is a kernel already in this iteration or already evaluated
        c["status"] = "abandoned"  # recorded as a compile error: its own code never built
        emit(state["run_dir"], "revise", f"{author}'s revision is identical to a kernel "
             "already being evaluated; dropped", t0=t0, iteration=it, agent=author,
             refs={"feedback": c["feedback"]}, duplicate=True, tokens=usage())
        return
    path = Path(c["path"])
    stem = path.stem.split(".r")[0].split(".fix")[0]
    new_path = path.with_name(f"{stem}.fix{path.suffix}") if wrong \
        else path.with_name(f"{stem}.r{c['tries']}{path.suffix}")
    new_path.write_text(new.change.kernel)
    Path(c["proposal"]).write_text(new.model_dump_json(indent=1))
    c.update(path=str(new_path), status="pending", kind=new.change.kind, digest=digest,
             wrong=None)
    if replan:
        c["replans"] = c.get("replans", 0) + 1
        c["replan"] = False
    how = "the wrong result" if wrong else "re-planning after repeated compile errors" \
        if replan else "the compile error"
    emit(state["run_dir"], "revise", f"{author} revised after {how}: {new.plan[:160]}",
         t0=t0, iteration=it, agent=author,
         refs={"kernel": str(new_path), "feedback": c["feedback"]},
         feedback=Path(c["feedback"]).read_text()[:2000], tokens=usage(),
         prompt_file=getattr(agent, "last_prompt_file", None),
         context=getattr(agent, "last_context", None), replanned=replan,
         explanation=getattr(agent, "last_explanation", None) if wrong else None)
