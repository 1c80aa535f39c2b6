"""finalize: time the best kernel against the baseline side by side, write the result."""

from __future__ import annotations

import math
import time
from pathlib import Path

from langgraph.runtime import Runtime

from kernelcrew.graph.context import RunContext
from kernelcrew.graph.nodes.common import baseline_digest, ctx_of, load_cached, store_cached
from kernelcrew.graph.nodes.demote import demote
from kernelcrew.graph.nodes.reflect import stop_reason
from kernelcrew.graph.services import release, tools_for
from kernelcrew.graph.state import CrewState
from kernelcrew.report.write import write_reports
from kernelcrew.tools.executor import Evaluation, ExecutorError
from kernelcrew.tools.judge import evaluate as ev
from kernelcrew.tools.judge.harness import case_key
from kernelcrew.trace import emit, read_trace, write_json_atomic


def finalize(state: CrewState, runtime: Runtime[RunContext]) -> dict:
    t0 = time.monotonic()
    ctx = ctx_of(runtime)
    tools = tools_for(state, ctx)
    run_dir = Path(state["run_dir"])
    best = state["best"]
    evals = list(state.get("evaluations", []))
    demotions: list[dict] = []
    if state.get("compile_only"):
        # no device: nothing was run or timed, and nothing is raced now
        rows = [{"group": c.group, "case": c.label, "sizes": c.sizes, "status": "pending",
                 "baseline_ms": None, "median_ms": None, "speedup": None,
                 "max_abs_err": None} for c in tools.harness.cases]
        final = {"speedup": None, "verdict": "not-run", "reason": "no device: nothing was run "
                 f"or timed ({state['compile_only']}); candidates were compiled only",
                 "band": None, "correct": None, "groups": {}, "rows": rows}
    while not state.get("compile_only"):
        final = _final_race(state, tools, best)
        if final["correct"] or best["author"] == "baseline" or final.get("baseline_failed"):
            break
        # the best failed its final re-run: demoted, the previous best is raced instead
        best, record = demote({**state, "best": best, "iteration": state["iteration"] - 1},
                              evals, reason=final["reason"],
                              where="re-timed against the baseline by finalize",
                              baseline_digest=baseline_digest(state, tools))
        evals.append(record)
        demotions.append(record)
    reason = state.get("stop_reason") or stop_reason(state, ctx) or "finished"
    typical = [r["baseline_ms"] for r in final["rows"] if r["group"] == "typical"
               and r.get("baseline_ms")]
    result = {
        "run_id": state["run_id"], "run_dir": str(run_dir), "op": state["op_name"],
        "family": state["family"], "backend": state["backend"],
        "iterations": state["iteration"] - 1, "stop_reason": reason,
        # the crew could not go on: an agent failed, or every specialist sat out
        "halted": bool(state.get("halts")) or reason.startswith("every specialist sat out"),
        "baseline_ms": sum(typical) if typical else state["baseline"]["typical_ms"],
        "best": {"path": best["path"], "speedup": final["speedup"], "correct": final["correct"],
                 "verdict_vs_baseline": final["verdict"], "reason": final["reason"],
                 "author": best["author"], "kind": best["kind"], "iteration": best["iteration"],
                 "source": best.get("source")},
        "evaluations": len([e for e in evals
                            if e["outcome"] not in ("compile-error", "infra-error")]),
        "infra_errors": len([e for e in evals if e["outcome"] == "infra-error"]),
        "compile_errors": len([e for e in evals if e["outcome"] == "compile-error"]),
        "accepted": [e for e in evals if e["outcome"] == "accepted"],
        "demoted": [e for e in evals if e["outcome"] == "demoted"],
        "table": final["rows"], "group_speedups": final["groups"], "noise_band": final["band"],
        "measured_noise": final.get("measured_noise"),
        "tokens": _tokens(run_dir),
        "ran": not state.get("compile_only"),
        **accounting(run_dir),
    }
    if state["baseline"].get("written"):
        result["baseline_written_by"] = "writer"
        result["vs_reference"] = _vs_reference(state["baseline"].get("reference_ms") or {},
                                               tools.harness.cases, final["rows"])
    if state.get("compile_only"):
        result["candidates"] = [
            {"kind": e["kind"], "author": e["author"], "path": e["path"],
             "outcome": e["outcome"], "detail": e["detail"]}
            for e in evals]
    write_json_atomic(run_dir / "result.json", result)
    head = (f"best {final['speedup']:.2f}x over the baseline ({final['verdict']})"
            if final["speedup"] is not None else f"not run: {final['reason']}")
    emit(run_dir, "finalize", f"{head}; stop: {reason}", t0=t0, iteration=state["iteration"] - 1,
         refs={"result": str(run_dir / "result.json"), "best": best["path"]},
         best_speedup=final["speedup"])
    try:
        write_reports(run_dir)
    except Exception as e:  # noqa: BLE001 - a report problem must not cost the finished run
        emit(run_dir, "report", f"report not written: {type(e).__name__}: {e}",
             t0=time.monotonic(), iteration=state["iteration"] - 1, ok=False)
    release(state["run_dir"])
    return {"stop_reason": reason, "result": result, "best": best, "evaluations": demotions}


def _final_race(state: CrewState, tools, best: dict) -> dict:
    """The best against the baseline, side by side (cached by the best's digest)."""
    key = f"final-{best['digest']}"
    final = load_cached(state["run_dir"], key)
    if final is None and best["author"] == "baseline":
        # nothing was accepted: the best is the baseline itself, speedup 1 by definition
        rows = [{"group": c.group, "case": c.label, "sizes": c.sizes, "status": "pass",
                 "baseline_ms": state["baseline"]["medians"].get(case_key(c)),
                 "median_ms": state["baseline"]["medians"].get(case_key(c)), "speedup": 1.0,
                 "max_abs_err": None} for c in tools.harness.cases]
        final = {"speedup": 1.0, "verdict": "same", "reason": "no candidate was accepted; the "
                 "best kernel is the baseline", "band": None, "correct": True, "groups": {},
                 "rows": rows}
    if final is None:
        base_path = Path(state["baseline"]["path"])
        try:
            [r] = tools.executor.evaluate([Evaluation(
                key=key, stage="race", kernel=Path(best["path"]).read_text(), path=best["path"],
                incumbent=base_path.read_text(), incumbent_path=str(base_path),
                against="the baseline")])
        except ev.IncumbentFailed as e:  # the baseline itself failed: a verdict, not a crash
            return {"speedup": None, "verdict": "rejected", "reason": str(e), "band": None,
                    "correct": False, "groups": {}, "rows": [], "baseline_failed": True}
        if r.infra_error or r.race is None:
            raise ExecutorError(f"the final race of the best kernel was lost: {r.infra_error}")
        race = r.race
        final = {"speedup": race.speedup, "verdict": race.verdict, "reason": race.reason,
                 "band": race.band, "measured_noise": race.measured_noise,
                 "min_speedup": race.min_speedup, "correct": not race.failure, "groups": race.groups,
                 "rows": [x.model_dump(mode="json") for x in race.rows], "ran_on": r.ran_on()}
        store_cached(state["run_dir"], key, final)
    return final


def _tokens(run_dir: Path) -> dict[str, int]:
    total: dict[str, int] = {}
    for e in read_trace(run_dir):
        for k, v in (e.get("tokens") or {}).items():
            if isinstance(v, int):
                total[k] = total.get(k, 0) + v
    return total


def _vs_reference(reference_ms: dict[str, float], cases: list, rows: list[dict]) -> dict:
    """The best kernel against the op's own reference implementation (NumPy), timed on the
    same machine: per typical case and their geometric mean."""
    per: list[dict] = []
    for c, r in zip(cases, rows, strict=False):
        ref = reference_ms.get(case_key(c))
        if ref is None or not r.get("median_ms"):
            continue
        per.append({"case": c.label, "reference_ms": ref, "best_ms": r["median_ms"],
                    "speedup": ref / r["median_ms"]})
    gm = math.exp(sum(math.log(p["speedup"]) for p in per) / len(per)) if per else None
    return {"speedup": gm, "cases": per,
            "what": "the op's reference.py (float64, NumPy) timed in the parent process"}


ANSWER_KINDS = ("usable", "malformed", "truncated", "schema", "wrong_signature", "invalid",
                "move_refused", "filtered", "refused")
CANDIDATE_KINDS = ("compile_error", "wrong_signature", "wrong_result", "not_faster",
                   "accepted")


def accounting(run_dir: Path) -> dict:
    """Every LLM answer by kind, every candidate's fate, and tokens and cost per agent and
    per iteration, from the trace (so a resumed run counts what it did before too)."""
    answers = dict.fromkeys(ANSWER_KINDS, 0)
    forms: dict[str, int] = {}  # usable code answers by how they made the change
    cands = dict.fromkeys(CANDIDATE_KINDS, 0)
    by_agent: dict[str, dict] = {}
    per_agent: dict[str, dict] = {}
    per_iter: dict[str, dict] = {}
    seconds: list[float] = []

    def bump(agent: str | None, group: str, kind: str) -> None:
        a = by_agent.setdefault(agent or "?", {"answers": {}, "candidates": {}})
        a[group][kind] = a[group].get(kind, 0) + 1

    for e in read_trace(run_dir):
        node, agent = e.get("node"), e.get("agent")
        if node == "answer":
            kind = e.get("kind") or "invalid"
            answers[kind] = answers.get(kind, 0) + 1
            bump(agent, "answers", kind)
            if kind == "usable" and e.get("form"):
                forms[e["form"]] = forms.get(e["form"], 0) + 1
            if e.get("duration_s") and not e.get("replayed"):
                seconds.append(float(e["duration_s"]))
            continue
        kind = None
        if node == "execute" and e.get("ok") is False:
            kind = "wrong_signature" if "wrong entry signature" in (e.get("summary") or "") \
                else "compile_error"
        elif node == "verify" and e.get("correct") is False:
            kind = "wrong_result"
        elif node == "benchmark" and e.get("verdict") in ("same", "slower"):
            kind = "not_faster"
        elif node == "gate" and e.get("accepted"):
            kind = "accepted"
        if kind:
            cands[kind] += 1
            for who in (agent or "?").split("+"):
                bump(who, "candidates", kind)
        t = e.get("tokens") or {}
        if t.get("total_tokens") or t.get("calls"):
            cost = (t.get("cost_microusd") or 0) / 1e6
            for key, table in ((agent or node or "?", per_agent),
                               (str(e.get("iteration", 0)), per_iter)):
                row = table.setdefault(key, {"input_tokens": 0, "output_tokens": 0,
                                             "total_tokens": 0, "calls": 0, "cost_usd": 0.0})
                for k in ("input_tokens", "output_tokens", "total_tokens", "calls"):
                    row[k] += int(t.get(k, 0) or 0)
                row["cost_usd"] = round(row["cost_usd"] + cost, 6)
    total_answers = sum(answers.values())
    return {
        "answers": {"total": total_answers, **answers,
                    "seconds_per_call": round(sum(seconds) / len(seconds), 2) if seconds
                    else None},
        "answer_forms": forms, "candidates": cands, "answers_by_agent": by_agent,
        "usage_by_agent": per_agent, "usage_by_iteration": per_iter,
        "cost_usd": round(sum(r["cost_usd"] for r in per_agent.values()), 6)
        if per_agent else None,
    }
