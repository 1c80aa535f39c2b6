"""observe: profile the current best, recall related reflections, fold old iterations."""

from __future__ import annotations

import time
from pathlib import Path

from langgraph.runtime import Runtime

from kernelcrew.graph.context import RunContext
from kernelcrew.graph.memory import memory_for
from kernelcrew.graph.nodes.common import baseline_digest, ctx_of
from kernelcrew.graph.nodes.demote import demote
from kernelcrew.graph.services import tools_for
from kernelcrew.graph.state import CrewState
from kernelcrew.tools.config import Limits
from kernelcrew.tools.observe.profile import ProfileFailed, profile
from kernelcrew.trace import emit, write_json_atomic


def observe(state: CrewState, runtime: Runtime[RunContext]) -> dict:
    t0 = time.monotonic()
    ctx = ctx_of(runtime)
    it = state["iteration"]
    tools = tools_for(state, ctx)
    prof_dir = Path(state["run_dir"]) / "profiles"
    prof_dir.mkdir(exist_ok=True)
    profile_json: dict = {}
    note = ""
    update: dict = {}
    best = state["best"]
    evaluations = list(state.get("evaluations", []))
    while True:
        try:
            # the run's worker timeout: a best kernel that hangs now is a verdict in time
            prof = profile(tools.spec, best["path"], tools.backend.name,
                           limits=Limits(timeout_s=ctx.timeout_s))
            profile_json = prof.model_dump(mode="json")
            write_json_atomic(prof_dir / f"iter{it:02d}.json", profile_json)
            bottleneck = prof.bottleneck.kind
            note = prof.summary
        except ImportError as e:
            bottleneck, note = "unknown", f"profile unavailable: {e}"
        except ProfileFailed as e:
            if best["author"] == "baseline":  # judged correct at the start: only no profile
                bottleneck, note = "unknown", f"profile unavailable: {e}"
            else:  # the best failed its re-run: demoted, profile the previous best instead
                best, record = demote({**state, "best": best}, evaluations, reason=str(e),
                                      where="re-profiled by observe",
                                      baseline_digest=baseline_digest(state, tools))
                evaluations.append(record)
                update.setdefault("evaluations", []).append(record)
                update["best"] = best
                continue
        break
    memory = memory_for(ctx)
    situation = {"text": note, "operator": state["op_name"], "family": state["family"],
                 "backend": state["backend"], "bottleneck": bottleneck}
    hits = memory.search(situation, k=5, family=state["family"], backend=state["backend"])
    reflections = [f"[{r.operator}/{r.change_kind}/{'accepted' if r.accepted else 'not accepted'}"
                   f" {r.speedup:.2f}x] {r.text[:300]}" for r, _score in hits]
    stats = {k: dict(v) for k, v in memory.change_kind_stats(
        family=state["family"], backend=state["backend"]).items()}
    emit(state["run_dir"], "observe",
         f"{bottleneck}; {len(reflections)} reflection(s) recalled; {note[:180]}", t0=t0,
         iteration=it, refs={"profile": str(prof_dir / f"iter{it:02d}.json")} if profile_json
         else {},
         reflections=reflections)
    return {"profile": profile_json, "reflections": reflections, "change_stats": stats,
            **update}
