"""Faults during a run stay verdicts: a best kernel that fails a re-run is demoted.

The best kernel is run again after it was accepted: profiled by observe (more calls than
the race made, on fresh inputs), timed as the incumbent of later races, and raced against
the baseline by finalize. A kernel that fails one of those re-runs (a wrong answer, a
timeout, a crash: a racy threaded kernel that passed once) loses its place: an
evaluation with outcome `demoted` records why, the trace says so, the previous best
(the latest accepted kernel not demoted, else the baseline) is the best again, on disk
too, and the run goes on from it.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path

from kernelcrew.graph.state import CrewState, Evaluation
from kernelcrew.trace import emit

DEMOTED = "demoted"


def demoted_digests(evaluations: list[Evaluation]) -> dict[str, str]:
    """digest -> why, for every kernel demoted in this run so far."""
    return {e["digest"]: e["detail"] for e in evaluations if e["outcome"] == DEMOTED}


def previous_best(state: CrewState, evaluations: list[Evaluation], baseline_digest: str) -> dict:
    """The best to fall back on: the latest accepted kernel not demoted, or the baseline."""
    best = state["best"]
    gone = set(demoted_digests(evaluations))
    for e in reversed(evaluations):
        if e["outcome"] == "accepted" and e["digest"] not in gone and Path(e["path"]).exists():
            return {"path": best["path"], "source": e["path"], "digest": e["digest"],
                    "speedup": e["speedup"], "iteration": e["iteration"], "author": e["author"],
                    "kind": e["kind"]}
    return {"path": best["path"], "source": state["baseline"]["path"], "digest": baseline_digest,
            "speedup": 1.0, "iteration": 0, "author": "baseline", "kind": "baseline"}


def demote(state: CrewState, evaluations: list[Evaluation], *, reason: str, where: str,
           baseline_digest: str) -> tuple[dict, Evaluation]:
    """Demote the current best; returns (the new best, the `demoted` evaluation).

    `evaluations`: the run's evaluations so far, including any this node has made and
    not yet returned. The previous best's file is copied back to the best's path."""
    t0 = time.monotonic()
    best = state["best"]
    it = state["iteration"]
    record: Evaluation = {
        "iteration": it, "author": best["author"], "kind": best["kind"],
        "path": best.get("source") or best["path"], "digest": best["digest"],
        "outcome": DEMOTED, "speedup": best["speedup"], "vs_best": None,
        "detail": f"failed its re-run ({where}): {reason}"[:600],
        "note": f"demoted: the former best failed a re-run ({where})", "compile_tries": 0}
    new_best = previous_best(state, [*evaluations, record], baseline_digest)
    shutil.copyfile(new_best["source"], best["path"])
    emit(state["run_dir"], "demote",
         f"{Path(record['path']).name} demoted ({where}): {reason[:200]}; the best is "
         f"{Path(new_best['source']).name} again ({new_best['speedup']:.2f}x)", t0=t0,
         iteration=it, agent="gate", refs={"kernel": record["path"]}, demoted=record["path"],
         reason=reason, where=where, best=new_best["source"], best_speedup=new_best["speedup"])
    return new_best, record
