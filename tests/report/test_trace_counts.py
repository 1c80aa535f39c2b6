"""trace.jsonl holds every node execution: counted against the iterations and specialists."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from kernelcrew.kernels.kernelfile import text_digest
from kernelcrew.trace import read_trace

KNOWN = {"baseline", "observe", "plan", "specialist", "coordinator", "execute", "revise",
         "verify", "benchmark", "gate", "critique", "reflect", "finalize"}
FIELDS = {"time", "duration_s", "iteration", "node", "agent", "summary", "refs", "tokens"}


def _specialists() -> list[str]:
    from kernelcrew.agents.specialist import specialist_names

    return list(specialist_names("heuristic"))


def test_every_event_has_the_trace_fields(crew_run):
    events = read_trace(crew_run["run_dir"])
    assert events
    for e in events:
        assert FIELDS <= set(e), (e["node"], FIELDS - set(e))
        assert e["node"] in KNOWN, f"unknown node {e['node']!r}"
        assert isinstance(e["duration_s"], float | int) and e["duration_s"] >= 0
        assert e["summary"].strip(), e


def test_node_executions_match_iterations_and_specialists(crew_run):
    run_dir = Path(crew_run["run_dir"])
    events = read_trace(run_dir)
    nodes = Counter(e["node"] for e in events)
    assert nodes["baseline"] == 1 and nodes["finalize"] == 1, nodes
    iterations = crew_run["iterations"]
    assert iterations == 2
    specialists = _specialists()
    assert specialists
    verified: set[str] = set()  # digests verified before: a repeat is read from the cache
    reflects_total = 0
    for it in range(1, iterations + 1):
        ev = [e for e in events if e["iteration"] == it and e["node"] != "finalize"]
        per = Counter(e["node"] for e in ev)
        assert per["observe"] == 1, (it, per)
        assert per["coordinator"] == 1, (it, per)
        assert per["gate"] == 1, (it, per)
        by_agent = Counter(e["agent"] for e in ev if e["node"] == "specialist")
        assert by_agent == Counter(specialists), (it, by_agent)
        # every candidate the coordinator sent is compiled at least once
        coord = next(e for e in ev if e["node"] == "coordinator")
        executes = [e for e in ev if e["node"] == "execute"]
        compiled = {Path(e["refs"]["kernel"]).name for e in executes}
        for c in coord["candidates"]:
            assert Path(c).name in compiled, f"iteration {it}: {c} never compiled"
        revisions = [e for e in ev if e["node"] == "revise" and "kernel" in e["refs"]]
        assert len(executes) == len(coord["candidates"]) + len(revisions), (it, executes)
        # one verify per compiled candidate, unless its digest was verified before
        ok = [e["refs"]["kernel"] for e in executes if e["ok"]]
        fresh = [k for k in ok if text_digest(Path(k).read_text()) not in verified]
        verifies = [e for e in ev if e["node"] == "verify"]
        assert sorted(Path(e["refs"]["kernel"]).name for e in verifies) == \
            sorted(Path(k).name for k in fresh), it
        verified |= {text_digest(Path(k).read_text()) for k in ok}
        # one benchmark per verified candidate
        correct = [e["refs"]["kernel"] for e in verifies if e["correct"]]
        benches = [e for e in ev if e["node"] == "benchmark"]
        assert sorted(Path(e["refs"]["kernel"]).name for e in benches) == \
            sorted(Path(k).name for k in correct), it
        # one reflection per evaluation: rejected at verify, raced, or given up on compiling
        revised = {e["refs"].get("feedback") for e in revisions}
        abandoned = [e for e in executes if not e["ok"] and e["refs"]["errors"] not in revised]
        reflects = [e for e in ev if e["node"] == "reflect"]
        n_eval = len(verifies) - len(correct) + len(benches) + len(abandoned)
        assert len(reflects) == n_eval, (it, len(reflects), n_eval)
        assert {e["about"] for e in reflects} >= {e["refs"]["kernel"] for e in benches}
        reflects_total += len(reflects)
    # the result's counts agree with the trace
    assert reflects_total == crew_run["evaluations"] + crew_run["compile_errors"]
    # and nothing happened outside the iterations but baseline and finalize
    stray = [e for e in events if e["iteration"] not in range(1, iterations + 1)
             and e["node"] not in ("baseline", "finalize")]
    assert not stray, stray
