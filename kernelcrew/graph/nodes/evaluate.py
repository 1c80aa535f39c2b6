"""verify (correctness on every shape group) and benchmark + gate (side by side with the
current best). Finished evaluations are cached in the run directory by kernel digest, so a
resumed run never repeats one."""

from __future__ import annotations

import math
import shutil
import time
from pathlib import Path
from typing import Literal

from langgraph.runtime import Runtime
from langgraph.types import Command, interrupt

from kernelcrew.graph.context import RunContext
from kernelcrew.graph.feedback import (
    integrity_failure,
    race_note,
    rejection_note,
    wrong_result_feedback,
)
from kernelcrew.graph.nodes.common import (
    baseline_digest,
    budget_spent,
    ctx_of,
    load_cached,
    store_cached,
)
from kernelcrew.graph.nodes.demote import demote
from kernelcrew.graph.services import tools_for
from kernelcrew.graph.state import CrewState, Evaluation
from kernelcrew.tools.executor import EvalResult
from kernelcrew.tools.executor import Evaluation as Job
from kernelcrew.tools.judge import evaluate as ev
from kernelcrew.tools.observe.static import static_evidence
from kernelcrew.trace import emit


def _record(c: dict, it: int, outcome: str, detail: str, *, note: str = "", speedup=None,
            vs_best=None, ran_on=None, groups=None) -> Evaluation:
    """An evaluation: `detail` in the judge's words (trace, report), `note` built from
    structured fields for the agents (graph.feedback)."""
    return {"iteration": it, "author": c["author"], "kind": c["kind"], "path": c["path"],
            "digest": c["digest"], "outcome": outcome, "speedup": speedup, "vs_best": vs_best,
            "detail": detail, "note": note or outcome, "groups": groups or {},
            "compile_tries": c["tries"], "ran_on": ran_on or {}}


def _where(r: EvalResult) -> dict:
    """Where and when a result was made, and the attempts the cluster lost on the way."""
    return r.trace_fields()


def _out_of_budget(state: CrewState, ctx: RunContext, c: dict, it: int, out: list[dict],
                   step: str) -> bool:
    """The wall-clock budget is checked before each evaluation starts: a candidate that
    would start after it is spent is recorded as not evaluated, with the reason."""
    spent = budget_spent(state, ctx)
    if not spent:
        return False
    c["status"] = "not-evaluated"
    out.append(_record(c, it, "not-evaluated", f"{spent} before its {step} started",
                       note=f"not evaluated: the run's time ran out before its {step}"))
    emit(state["run_dir"], step, f"{Path(c['path']).name}: not evaluated, {spent}",
         t0=time.monotonic(), iteration=it, agent=c["author"], refs={"kernel": c["path"]},
         skipped=spent)
    return True


def verify(state: CrewState, runtime: Runtime[RunContext]
           ) -> Command[Literal["revise", "benchmark"]]:
    ctx = ctx_of(runtime)
    it = state["iteration"]
    tools = tools_for(state, ctx)
    candidates = [dict(c) for c in state.get("candidates", [])]
    evaluations: list[dict] = []
    if state.get("compile_only"):
        return _compile_only(state, tools, candidates, it)
    found: dict[str, dict] = {}  # cache key -> what the verification found
    todo: dict[str, int] = {}
    batch = []
    for i, c in enumerate(candidates):
        if c["status"] != "compiled":
            continue
        if _out_of_budget(state, ctx, c, it, evaluations, "verify"):
            continue
        key = f"verify-{c['digest']}"
        cached = load_cached(state["run_dir"], key)
        if cached is not None:
            found[key] = cached
        elif key not in todo:
            todo[key] = i
            batch.append(Job(key=key, stage="verify", kernel=Path(c["path"]).read_text(),
                                    path=c["path"]))
    t0 = time.monotonic()

    def verified(r: EvalResult) -> None:  # stored as it lands: a kill loses no finished one
        nonlocal t0
        c = candidates[todo[r.key]]
        if r.infra_error:
            found[r.key] = {"infra_error": r.infra_error}
            emit(state["run_dir"], "verify", f"{Path(c['path']).name}: not verified: "
                 f"{r.infra_error[:200]}", t0=t0, iteration=it, agent=c["author"],
                 refs={"kernel": c["path"]}, correct=None, infra_error=r.infra_error,
                 **_where(r))
            t0 = time.monotonic()
            return
        v = r.verify
        assert v is not None
        cached = {"correct": v.correct, "failure": v.failure,
                  "rows": [x.model_dump(mode="json") for x in v.rows], "ran_on": r.ran_on()}
        store_cached(state["run_dir"], r.key, cached)
        found[r.key] = cached
        emit(state["run_dir"], "verify", f"{Path(c['path']).name}: "
             + ("correct on every shape group" if v.correct else v.failure[:200]),
             t0=t0, iteration=it, agent=c["author"], refs={"kernel": c["path"]},
             correct=v.correct, sandbox=v.sandbox, **_where(r))
        t0 = time.monotonic()

    tools.executor.evaluate(batch, on_result=verified)
    for c in candidates:
        if c["status"] != "compiled":
            continue
        cached = found[f"verify-{c['digest']}"]
        if cached.get("infra_error"):
            c["status"] = "infra-error"
            evaluations.append(_record(c, it, "infra-error", cached["infra_error"],
                                       note="not evaluated (an infrastructure error)"))
            continue
        if cached["correct"]:
            c["status"] = "verified"
            continue
        _wrong(c, cached, ctx, tools, it, evaluations)
    goto = "revise" if any(c["status"] == "incorrect" for c in candidates) else "benchmark"
    return Command(goto=goto, update={"candidates": candidates, "evaluations": evaluations})


def _wrong(c: dict, cached: dict, ctx: RunContext, tools, it: int,
           evaluations: list[Evaluation]) -> None:
    """A wrong result goes back to its author once (LLM authors): the worst elements, and
    the request to explain where the error comes from before fixing the code. What the
    author reads is built from the rows' data fields, never from the judge's words."""
    author = c["author"].split("+")[0]
    rows = cached["rows"]
    note = rejection_note(rows)
    wrong = any(r.get("status") == "fail" for r in rows)
    if wrong and not c.get("fixed_once") and ctx.policy_for(author) == "llm" \
            and not integrity_failure(rows):
        fb = Path(c["path"]).with_suffix(".wrong.txt")
        tol = f"rtol={tools.spec.tolerance.rtol:g}, atol={tools.spec.tolerance.atol:g}"
        fb.write_text(wrong_result_feedback(rows, tol))
        c.update(status="incorrect", feedback=str(fb), fixed_once=True,
                 wrong=cached["failure"][:200], wrong_note=note)
        return
    c["status"] = "rejected"
    evaluations.append(_record(c, it, "rejected", cached["failure"], note=f"rejected: {note}",
                               ran_on=cached.get("ran_on")))


def _compile_only(state: CrewState, tools, candidates: list[dict], it: int) -> Command:
    """No device: each compiled candidate is recorded as `not-run` with what the compiler
    says about it (ptxas registers, spills, shared memory; SASS instruction counts;
    theoretical occupancy), next to the same for the current best. No timing, no verdict."""
    best = state["best"]
    best_kf = tools.parse(Path(best["path"]).read_text(), path=Path(best["path"]))
    before = static_evidence(tools.spec, best_kf, tools.compile(best_kf), tools.backend)
    evaluations = []
    for c in candidates:
        if c["status"] != "compiled":
            continue
        t0 = time.monotonic()
        kf = tools.parse(Path(c["path"]).read_text(), path=Path(c["path"]))
        after = static_evidence(tools.spec, kf, tools.compile(kf), tools.backend)
        detail = (f"compiled for {after['arch']}, not run ({state['compile_only']}); "
                  f"{after['text']} (best so far: {before['text']})")
        c["status"] = "not-run"
        c["static"] = after
        evaluations.append(_record(c, it, "not-run", detail, note=f"compiled, not run (no "
                                   f"device); {after['text'][:300]}"))
        emit(state["run_dir"], "verify", f"{Path(c['path']).name}: not run, static evidence: "
             f"{after['text'][:300]}", t0=t0, iteration=it, agent=c["author"],
             refs={"kernel": c["path"]}, correct=None, static=after, best_static=before)
    return Command(goto="benchmark", update={"candidates": candidates,
                                             "evaluations": evaluations})


def benchmark(state: CrewState, runtime: Runtime[RunContext]) -> dict:
    """Time each verified candidate against the current best; accept the fastest win."""
    if state.get("compile_only"):
        return {"since_improvement": state.get("since_improvement", 0) + 1}
    ctx = ctx_of(runtime)
    it = state["iteration"]
    tools = tools_for(state, ctx)
    best = state["best"]
    candidates = [dict(c) for c in state.get("candidates", [])]
    results: list[tuple[dict, dict]] = []
    skipped: list[Evaluation] = []
    demotions: list[Evaluation] = []  # the best failed its re-run as the incumbent of a race
    pending = [c for c in candidates if c["status"] == "verified"]
    while pending:
        c = pending.pop(0)
        if _out_of_budget(state, ctx, c, it, skipped, "benchmark"):
            continue
        try:
            cached = _race(state, tools, c, best, skipped)
        except ev.IncumbentFailed as e:
            if best["author"] == "baseline":  # nothing to fall back on: the run stops
                halt = f"the baseline failed a re-check while timed: {e.reason}"
                emit(state["run_dir"], "benchmark", halt, t0=time.monotonic(), iteration=it,
                     agent="gate", ok=False)
                return {"candidates": candidates, "evaluations": [*demotions, *skipped],
                        "best": best, "halts": [halt],
                        "since_improvement": state.get("since_improvement", 0) + 1}
            # the best failed while timed again: demoted; this candidate (and the rest)
            # are raced against the previous best instead
            best, record = demote({**state, "best": best},
                                  [*state.get("evaluations", []), *demotions],
                                  reason=e.reason, where="re-timed as the incumbent",
                                  baseline_digest=baseline_digest(state, tools))
            demotions.append(record)
            pending = [done for done, _ in results] + [c] + pending  # timed against it
            results = []
            continue
        if cached is not None:
            results.append((c, cached))
    return _settle(state, ctx, candidates, results, best, [*demotions, *skipped])


def _race(state: CrewState, tools, c: dict, best: dict, skipped: list[Evaluation]
          ) -> dict | None:
    """One candidate against the best, side by side (cached by both digests); None when
    the cluster lost it (recorded in `skipped`). Raises IncumbentFailed from the judge."""
    it = state["iteration"]
    t0 = time.monotonic()
    key = f"race-{c['digest']}-vs-{best['digest']}"
    cached = load_cached(state["run_dir"], key)
    if cached is not None:
        return cached
    [r] = tools.executor.evaluate([Job(
        key=key, stage="race", kernel=Path(c["path"]).read_text(), path=c["path"],
        incumbent=Path(best["path"]).read_text(), incumbent_path=best["path"],
        against="the current best")])
    if r.infra_error or r.race is None:  # the cluster lost it: no verdict
        c["status"] = "infra-error"
        skipped.append(_record(c, it, "infra-error", r.infra_error,
                               note="not timed (an infrastructure error)"))
        emit(state["run_dir"], "benchmark", f"{Path(c['path']).name}: not timed: "
             f"{r.infra_error[:200]}", t0=t0, iteration=it, agent=c["author"],
             refs={"kernel": c["path"]}, verdict=None, infra_error=r.infra_error, **_where(r))
        return None
    race = r.race
    cached = {"verdict": race.verdict, "vs_best": race.speedup, "band": race.band,
              "measured_noise": race.measured_noise, "min_speedup": race.min_speedup,
              "reason": race.reason, "groups": race.groups,
              "rows": [x.model_dump(mode="json") for x in race.rows], "ran_on": r.ran_on()}
    store_cached(state["run_dir"], key, cached)
    emit(state["run_dir"], "benchmark", f"{Path(c['path']).name}: {cached['verdict']} "
         f"vs the best ({cached['reason']})", t0=t0, iteration=it, agent=c["author"],
         refs={"kernel": c["path"]}, verdict=cached["verdict"], vs_best=cached["vs_best"],
         band=cached["band"], measured_noise=cached.get("measured_noise"),
         rows=cached["rows"], **_where(r))
    return cached


def _settle(state: CrewState, ctx: RunContext, candidates: list[dict],
            results: list[tuple[dict, dict]], best: dict, evaluations: list[Evaluation]
            ) -> dict:
    """The fastest win is accepted (a person may decline it with --approve); every raced
    candidate gets its evaluation, with a note built from the race's data."""
    it = state["iteration"]
    t0 = time.monotonic()
    winners = [(c, r) for c, r in results if r["verdict"] == "faster"]
    winner = max(winners, key=lambda cr: cr[1]["vs_best"], default=None)
    if winner and ctx.approve:
        c, r = winner
        answer = interrupt({"question": f"accept {Path(c['path']).name} ({c['author']}/"
                                        f"{c['kind']}, {r['vs_best']:.2f}x vs the current "
                                        "best)?", "kernel": c["path"], "rows": r["rows"]})
        if not _yes(answer):
            winner = None
            c["declined"] = True
    new_best = dict(best)
    for c, r in results:
        chained = best["speedup"] * r["vs_best"] if r["vs_best"] else None
        if winner is not None and c is winner[0]:
            outcome = "accepted"
            new_best = {"path": best["path"], "source": c["path"], "digest": c["digest"],
                        "speedup": chained, "iteration": it, "author": c["author"],
                        "kind": c["kind"]}
            shutil.copyfile(c["path"], best["path"])  # the best so far is always on disk
        elif c.get("declined"):
            outcome = "declined"
        elif r["verdict"] == "faster":
            outcome = "faster-not-best"
        else:
            outcome = r["verdict"]
        c["status"] = outcome
        note = f"rejected: {rejection_note(r.get('rows') or [])}" if outcome == "rejected" \
            else race_note(outcome, r["vs_best"], r.get("groups"))
        evaluations.append(_record(c, it, outcome, r["reason"], speedup=chained,
                                   vs_best=r["vs_best"], ran_on=r.get("ran_on"),
                                   groups=r.get("groups") or {}, note=note))
    improved = winner is not None
    emit(state["run_dir"], "gate", (f"accepted {Path(winner[0]['path']).name}: "
                                    f"{new_best['speedup']:.2f}x over the baseline")
         if improved else "no candidate accepted this iteration", t0=t0, iteration=it,
         agent="gate", accepted=winner[0]["path"] if improved else None,
         best_speedup=new_best["speedup"])
    return {"candidates": candidates, "evaluations": evaluations, "best": new_best,
            "since_improvement": 0 if improved else state.get("since_improvement", 0) + 1}


def _yes(answer: object) -> bool:
    if isinstance(answer, bool):
        return answer
    if isinstance(answer, dict):
        return bool(answer.get("approve") or answer.get("accept"))
    return str(answer).strip().lower() in ("y", "yes", "true", "accept", "1")


def geomean(xs: list[float]) -> float:
    xs = [x for x in xs if x and x > 0]
    return math.exp(sum(map(math.log, xs)) / len(xs)) if xs else float("nan")
