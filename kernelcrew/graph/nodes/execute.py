"""execute: compile each candidate; a compile error goes back to its author (revise)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Literal

from langgraph.runtime import Runtime
from langgraph.types import Command

from kernelcrew.agents.context import AgentContext, Feedback
from kernelcrew.agents.proposal import Proposal
from kernelcrew.agents.specialist import get_specialist
from kernelcrew.errors import AgentUnavailable, InputError
from kernelcrew.graph.context import RunContext
from kernelcrew.graph.nodes.common import ctx_of, record_answers
from kernelcrew.graph.nodes.plan import agent_context
from kernelcrew.graph.services import tools_for
from kernelcrew.graph.state import CrewState
from kernelcrew.kernels.kernelfile import text_digest, validate_against
from kernelcrew.kernels.signature import check_entry, entry_params
from kernelcrew.results import CompileResult
from kernelcrew.tools.executor import EvalResult, Evaluation
from kernelcrew.trace import emit


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


def execute(state: CrewState, runtime: Runtime[RunContext]
            ) -> Command[Literal["revise", "verify"]]:
    ctx = ctx_of(runtime)
    it = state["iteration"]
    candidates = [dict(c) for c in state.get("candidates", [])]
    failures = state.get("compile_failures", 0)
    tools = tools_for(state, ctx)
    todo = {f"compile-{i}-{c['digest']}": c for i, c in enumerate(candidates)
            if c["status"] == "pending"}
    t0 = time.monotonic()

    def compiled(r: EvalResult) -> None:  # each compile as it lands (in parallel on Ray)
        nonlocal failures, t0
        c = todo[r.key]
        where = r.trace_fields()
        if r.infra_error:  # no verdict on the kernel: it goes back to pending next time
            c["status"] = "infra-error"
            c["infra_error"] = r.infra_error
            emit(state["run_dir"], "execute", f"{Path(c['path']).name} not compiled: "
                 f"{r.infra_error[:200]}", t0=t0, iteration=it, agent=c["author"],
                 refs={"kernel": c["path"]}, ok=None, infra_error=r.infra_error, **where)
            t0 = time.monotonic()
            return
        comp = r.compile
        assert comp is not None
        c["tries"] += 1
        if comp.ok:
            c["status"] = "compiled"
            failures = 0
            res = ", ".join(f"{x.kernel}: {x.registers} regs" for x in comp.resources)
            emit(state["run_dir"], "execute", f"compiled {Path(c['path']).name} in "
                 f"{comp.seconds:.1f} s{' (cached)' if comp.cached else ''} {res}", t0=t0,
                 iteration=it, agent=c["author"], refs={"kernel": c["path"]}, ok=True, **where)
            t0 = time.monotonic()
            return
        failures += 1
        fb = comp.feedback()
        err_file = Path(c["path"]).with_suffix(".errors.txt")
        err_file.write_text(fb)
        c["feedback"] = str(err_file)
        c["status"] = "compile-error" if c["tries"] < ctx.max_compile_tries else "abandoned"
        emit(state["run_dir"], "execute", f"compile error in {Path(c['path']).name} (try "
             f"{c['tries']}/{ctx.max_compile_tries}): {fb.splitlines()[0][:160]}", t0=t0,
             iteration=it, agent=c["author"], refs={"kernel": c["path"], "errors": str(err_file)},
             ok=False, messages=[m.model_dump() for m in comp.messages[:5]], **where)
        t0 = time.monotonic()

    tools.executor.evaluate([Evaluation(key=k, stage="compile", kernel=Path(c["path"]).read_text(),
                                        path=c["path"]) for k, c in todo.items()],
                            on_result=compiled)
    evaluations = []
    for c in candidates:
        if c["status"] == "abandoned" and not c.get("recorded"):
            c["recorded"] = True
            wrong = c.get("wrong")  # a wrong result whose fix was given up
            evaluations.append({"iteration": it, "author": c["author"], "kind": c["kind"],
                                "path": c["path"], "digest": c["digest"],
                                "outcome": "rejected" if wrong else "compile-error",
                                "speedup": None, "vs_best": None,
                                "detail": wrong or Path(c["feedback"]).read_text().splitlines(
                                )[0][:200], "compile_tries": c["tries"]})
        if c["status"] == "infra-error" and not c.get("recorded"):
            c["recorded"] = True  # the cluster lost it: an infrastructure error, no verdict
            evaluations.append({"iteration": it, "author": c["author"], "kind": c["kind"],
                                "path": c["path"], "digest": c["digest"],
                                "outcome": "infra-error", "speedup": None, "vs_best": None,
                                "detail": c["infra_error"][:200], "compile_tries": c["tries"]})
    update = {"candidates": candidates, "compile_failures": failures, "evaluations": evaluations}
    if failures >= ctx.max_compile_tries:
        update["plan_first"] = True
    goto = "revise" if any(c["status"] == "compile-error" for c in candidates) else "verify"
    return Command(goto=goto, update=update)


def revise(state: CrewState, runtime: Runtime[RunContext]) -> dict:
    """Each failed candidate goes back to its author with the normalized errors."""
    ctx = ctx_of(runtime)
    it = state["iteration"]
    candidates = [dict(c) for c in state["candidates"]]
    halts: list[str] = []
    answers: list[dict] = []
    for c in candidates:
        if c["status"] not in ("compile-error", "incorrect"):
            continue
        t0 = time.monotonic()
        failed = Proposal.model_validate_json(Path(c["proposal"]).read_text())
        actx = agent_context(state, ctx)
        wrong = c["status"] == "incorrect"
        actx.feedback = Feedback(kind="incorrect" if wrong else "compile-error",
                                 message=Path(c["feedback"]).read_text(),
                                 attempt=1 if wrong else c["tries"])
        if wrong:
            pass
        elif state.get("plan_first") or state.get("compile_failures", 0) >= ctx.max_compile_tries:
            actx.feedback.message = ("Three compile failures in a row: revise your PLAN first, "
                                     "then write the code.\n" + actx.feedback.message)
        author = c["author"].split("+")[0]
        agent = get_specialist(author, ctx.policy_for(author))
        if hasattr(agent, "configure"):
            agent.configure(ctx.llm)
        if "run_dir" in AgentContext.model_fields:
            actx.run_dir = state["run_dir"]
        halted = False
        try:
            new = agent.revise(actx, failed)
        except AgentUnavailable as e:
            new, halted = None, True
            halts.append(f"{author}: {e}")
            emit(state["run_dir"], "revise", f"{author} cannot continue: {e}", t0=t0,
                 iteration=it, agent=author, halted=True,
                 tokens=getattr(agent, "last_usage", None) or {})
        answers += record_answers(state["run_dir"], agent, it, "revise")
        if new is None:
            c["status"] = "abandoned"
            if not halted:
                why = getattr(agent, "last_error", None)
                what = "a wrong result" if wrong else f"{c['tries']} compile error(s)"
                emit(state["run_dir"], "revise", f"{author} gives up on {c['kind']} after "
                     f"{what}" + (f": {why}" if why else ""), t0=t0,
                     iteration=it, agent=author, tokens=getattr(agent, "last_usage", None) or {},
                     prompt_file=getattr(agent, "last_prompt_file", None))
            continue
        digest = text_digest(new.change.kernel)
        others = {o["digest"] for o in candidates if o is not c and o["status"] != "abandoned"}
        others |= {e.get("digest") for e in state.get("evaluations", [])}
        if digest in others:
            # the revision is a kernel already in this iteration or already evaluated
            c["status"] = "abandoned"  # recorded as a compile error: its own code never built
            emit(state["run_dir"], "revise", f"{author}'s revision is identical to a kernel "
                 "already being evaluated; dropped", t0=t0, iteration=it, agent=author,
                 refs={"feedback": c["feedback"]}, duplicate=True,
                 tokens=getattr(agent, "last_usage", None) or {})
            continue
        tries = c["tries"]
        path = Path(c["path"])
        new_path = path.with_name(f"{path.stem.split('.r')[0]}.fix{path.suffix}") if wrong \
            else path.with_name(f"{path.stem.split('.r')[0]}.r{tries}{path.suffix}")
        new_path.write_text(new.change.kernel)
        Path(c["proposal"]).write_text(new.model_dump_json(indent=1))
        c.update(path=str(new_path), status="pending", kind=new.change.kind, digest=digest,
                 wrong=None)
        emit(state["run_dir"], "revise", f"{author} revised after "
             f"{'the wrong result' if wrong else 'the compile error'}: {new.plan[:160]}", t0=t0, iteration=it, agent=author,
             refs={"kernel": str(new_path), "feedback": c["feedback"]},
             feedback=Path(c["feedback"]).read_text()[:2000],
             tokens=getattr(agent, "last_usage", None) or {},
             prompt_file=getattr(agent, "last_prompt_file", None),
             context=getattr(agent, "last_context", None),
             explanation=getattr(agent, "last_explanation", None) if wrong else None)
    return {"candidates": candidates, "halts": halts, "answers": answers}
