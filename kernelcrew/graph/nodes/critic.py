"""critique: after the races, why each raced candidate won or lost, with numbers.

For each candidate timed against the best this iteration: its per-group speedups and
times against the best's, and (for one that was not accepted: the accepted one is
profiled by the next observe) its profile taken now and compared with the best's, metric
by metric. The heuristic critic states the result and the largest metric changes in a few
sentences; the LLM critic (`--agents critic=llm`) explains them in its own words and must
cite the numbers. The critique goes to the next iteration's specialists (a candidate that
was not faster goes back to its author with it), to the reflection and to the trace.
Nothing in it comes from the judge's wording: group names, times, ratios and metrics.
"""

from __future__ import annotations

import time
from pathlib import Path

from langgraph.runtime import Runtime

from kernelcrew.agents.contract import redact
from kernelcrew.agents.llm.budget import BudgetSpent
from kernelcrew.agents.llm.critic import LLMCritic
from kernelcrew.errors import AgentUnavailable
from kernelcrew.graph.context import RunContext
from kernelcrew.graph.feedback import group_times
from kernelcrew.graph.nodes.common import ctx_of, llm_settings, load_cached, record_answers
from kernelcrew.graph.services import tools_for
from kernelcrew.graph.state import CrewState, Critique, Evaluation
from kernelcrew.tools.config import Limits
from kernelcrew.tools.observe.profile import ProfileFailed, profile
from kernelcrew.trace import emit, write_json_atomic

RACED = ("accepted", "faster-not-best", "same", "slower", "declined")
# metrics worth comparing, when both profiles have them: name -> how it reads
METRICS = {
    "time_ms": "time of the profiled case (ms)", "achieved_bandwidth": "bandwidth (GB/s)",
    "bandwidth_pct": "share of peak bandwidth (%)", "achieved_flops": "GFLOP/s",
    "threads_busy": "threads busy", "hot_loop_vector_bytes": "hot loop vector width (bytes)",
    "ipc": "instructions per cycle", "l2_hit_rate": "L2 hit rate (%)",
    "llc_hit_rate": "LLC hit rate (%)", "registers_per_thread": "registers per thread",
    "achieved_occupancy_pct": "achieved occupancy (%)",
    "dram_throughput_pct": "DRAM throughput (% of peak)",
    "spill_stores_bytes": "spill stores (bytes)",
}
SHOWN_METRICS = 4


def _values(prof: dict | None) -> dict[str, float]:
    out = {}
    for k, m in ((prof or {}).get("metrics") or {}).items():
        if k in METRICS and isinstance(m, dict) and isinstance(m.get("value"), int | float):
            out[k] = float(m["value"])
    return out


def metric_deltas(cand: dict | None, best: dict | None) -> list[tuple[str, float, float]]:
    """(metric, candidate, best) for the metrics that changed most, largest first."""
    a, b = _values(cand), _values(best)
    both = [(k, a[k], b[k]) for k in METRICS if k in a and k in b and a[k] != b[k]]
    both.sort(key=lambda t: abs(t[1] - t[2]) / max(abs(t[2]), 1e-9), reverse=True)
    return both[:SHOWN_METRICS]


def facts_of(e: Evaluation, race: dict, deltas: list[tuple[str, float, float]],
             cand_prof: dict | None, best_prof: dict | None) -> tuple[list[str], list[float]]:
    """What the critic is told, and the numbers it must cite (no case sizes, no judge
    wording)."""
    verdict = {"accepted": "won and was accepted", "faster-not-best": "won, but another "
               "candidate was faster", "declined": "won, declined by a person",
               "same": "made no measurable difference", "slower": "lost"}[e["outcome"]]
    vs = e.get("vs_best")
    facts = [f"Candidate: {e['author']}'s {e['kind']}: it {verdict}"
             + (f", {vs:.3f}x vs the best, side by side." if vs else ".")]
    measured = [round(vs, 3)] if vs else []
    groups = race.get("groups") or {}
    if groups:
        facts.append("Per shape group, speedup vs the best: "
                     + ", ".join(f"{g} {s:.3f}x" for g, s in groups.items() if s) + ".")
        measured += [round(s, 3) for s in groups.values() if s]
    times = group_times(race.get("rows") or [])
    if times:
        facts.append("Time per group (sum over its cases), candidate vs best: " + "; ".join(
            f"{g} {a:.4g} ms vs {b:.4g} ms" for g, (a, b) in times.items()) + ".")
        measured += [round(a, 4) for a, _ in times.values()]
    if deltas:
        facts.append("Profile, candidate vs best: " + "; ".join(
            f"{METRICS[k]} {a:.4g} vs {b:.4g}" for k, a, b in deltas) + ".")
        measured += [round(a, 4) for _, a, _ in deltas]
    kinds = [((p or {}).get("bottleneck") or {}).get("kind") for p in (cand_prof, best_prof)]
    if all(kinds):
        facts.append(f"Bottleneck: {kinds[0]} (the best: {kinds[1]}).")
    return facts, measured


def heuristic_critique(e: Evaluation, race: dict, deltas: list[tuple[str, float, float]],
                       cand_prof: dict | None, best_prof: dict | None) -> str:
    """A few sentences with numbers: the result, where the time went, what the profile
    says changed, and the likeliest reason."""
    facts, _ = facts_of(e, race, deltas, cand_prof, best_prof)
    lost = e["outcome"] in ("slower", "same")
    why = ""
    d = {k: (a, b) for k, a, b in deltas}
    if lost and "threads_busy" in d and d["threads_busy"][0] > d["threads_busy"][1]:
        why = ("More threads were busy but the time did not fall: the threading overhead or "
               "the memory bandwidth ate the gain at these sizes.")
    elif lost and "hot_loop_vector_bytes" not in d and cand_prof is not None:
        why = "The hot loop's vector width did not change: the compiler made the same code."
    elif lost and not deltas and cand_prof is not None:
        why = "Its profile is the best's: the change did not reach what limits the kernel."
    elif not lost and deltas:
        k, a, b = deltas[0]
        why = f"The largest change: {METRICS[k]} {a:.4g} against {b:.4g}."
    kinds = [((p or {}).get("bottleneck") or {}).get("kind") for p in (cand_prof, best_prof)]
    if lost and all(kinds) and kinds[0] == kinds[1]:
        why += f" It is still {kinds[0]}."
    return " ".join([*facts[:3], *(f for f in facts[3:4] if deltas), why]).strip()


def _profile_candidate(state: CrewState, ctx: RunContext, e: Evaluation, k: int
                       ) -> dict | None:
    tools = tools_for(state, ctx)
    try:
        prof = profile(tools.spec, e["path"], tools.backend.name,
                       limits=Limits(timeout_s=ctx.timeout_s))
    except (ProfileFailed, ImportError, OSError):
        return None
    out = prof.model_dump(mode="json")
    folder = Path(state["run_dir"]) / "profiles"
    folder.mkdir(exist_ok=True)
    write_json_atomic(folder / f"iter{state['iteration']:02d}-cand{k}.json", out)
    return out


def critique(state: CrewState, runtime: Runtime[RunContext]) -> dict:
    ctx = ctx_of(runtime)
    it = state["iteration"]
    if state.get("compile_only"):
        return {}
    spec = tools_for(state, ctx).spec
    best_prof = state.get("profile") or None
    llm = LLMCritic(llm_settings(ctx), run_dir=state["run_dir"]) \
        if ctx.policy_for("critic") == "llm" else None
    out: list[Critique] = []
    answers: list[dict] = []
    halts: list[str] = []
    raced = [e for e in state.get("evaluations", []) if e["iteration"] == it
             and e["outcome"] in RACED]
    for k, e in enumerate(raced):
        t0 = time.monotonic()
        race = _race_of(state, e)
        profiles = ctx.critic_profiles if ctx.critic_profiles is not None \
            else "llm" in ctx.agents
        cand_prof = _profile_candidate(state, ctx, e, k) \
            if profiles and e["outcome"] != "accepted" else None
        deltas = metric_deltas(cand_prof, best_prof) if cand_prof else []
        text = heuristic_critique(e, race, deltas, cand_prof, best_prof)
        by = "heuristic"
        if llm is not None and not halts:
            facts, measured = facts_of(e, race, deltas, cand_prof, best_prof)
            try:
                said = llm.explain(facts=facts, measured=measured, iteration=it)
            except (AgentUnavailable, BudgetSpent) as err:  # the heuristic critique stands
                said = None
                halts.append(str(err))
            answers += record_answers(state["run_dir"], llm, it, "critique")
            if said:
                text, by = said, "llm"
        text = redact(text, spec)
        out.append({"iteration": it, "author": e["author"], "kind": e["kind"],
                    "path": e["path"], "outcome": e["outcome"], "vs_best": e.get("vs_best"),
                    "text": text, "by": by})
        emit(state["run_dir"], "critique", text, t0=t0, iteration=it, agent="critic",
             about=e["path"], outcome=e["outcome"], by=by, deltas=deltas,
             refs={"kernel": e["path"]},
             tokens=llm.last_usage if llm is not None and by == "llm" else {})
    return {"critiques": out, "answers": answers}


def _race_of(state: CrewState, e: Evaluation) -> dict:
    """The cached race of this evaluation (its rows and per-group speedups)."""
    folder = Path(state["run_dir"]) / "evals"
    for f in sorted(folder.glob(f"race-{e['digest']}-vs-*.json")):
        got = load_cached(state["run_dir"], f.stem)
        if got is not None:
            return got
    return {"groups": e.get("groups") or {}, "rows": []}
