"""The crew's graph end to end on a small op: extension, compile-error loop, plan-first,
the trace, and kill -9 followed by --resume."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from kernelcrew import build_graph
from kernelcrew.agents.specialist import register_specialist, unregister_specialist
from kernelcrew.graph.build import RECURSION_LIMIT
from kernelcrew.trace import read_trace
from tests.conftest import OPS, ROOT
from tests.graph import specialists as sp

VADD = str(OPS / "vadd")


def run_crew(run_dir: Path, names: list[str], **ctx) -> dict:
    graph = build_graph()
    out = graph.invoke({"operator": VADD}, {"recursion_limit": RECURSION_LIMIT},
                       context={"backend": "cpu", "specialists": names, "reps": 4,
                                "use_memory": False, "run_dir": str(run_dir), **ctx})
    return out


@pytest.fixture
def registered():
    names = []

    def reg(name, obj):
        register_specialist(name, obj, policy="heuristic")
        names.append(name)

    yield reg
    for n in names:
        unregister_specialist(n, policy="heuristic")


def test_registered_specialist_joins_fan_out_coordinator_and_trace(tmp_path, registered):
    registered("unroll_flags", sp.UnrollFlagsSpecialist())
    out = run_crew(tmp_path / "run", ["loop", "unroll_flags"], max_iters=1)
    trace = read_trace(tmp_path / "run")
    agents = {e["agent"] for e in trace if e["node"] == "specialist"}
    assert agents == {"loop", "unroll_flags"}
    coord = next(e for e in trace if e["node"] == "coordinator")
    assert "unroll_flags" in coord["summary"]
    assert any("unroll_flags" in e.get("agent") or "" for e in trace if e["node"] == "execute")
    assert out["result"]["best"]["correct"] is True


def test_compile_error_reaches_author_normalized_and_retry_compiles(tmp_path, registered):
    sp.FlakyCompilerSpecialist.feedback_seen.clear()
    registered("flaky", sp.FlakyCompilerSpecialist())
    run_crew(tmp_path / "run", ["flaky"], max_iters=1)
    trace = read_trace(tmp_path / "run")
    fb = sp.FlakyCompilerSpecialist.feedback_seen
    assert len(fb) == 1
    # normalized: line number in the kernel file, kind, message
    lines = Path(VADD, "baseline.cpp").read_text().count("\n")
    assert f"line {lines + 2}: error: #error this candidate does not compile" in fb[0]
    steps = [(e["node"], e.get("ok")) for e in trace if e["node"] in ("execute", "revise")]
    assert steps == [("execute", False), ("revise", None), ("execute", True)]
    assert any(e["node"] == "verify" and "flaky" in (e.get("agent") or "") for e in trace)


@pytest.mark.slow  # a crew run through two re-plans: about 14 s
def test_repeated_compile_failures_re_plan_the_candidate_then_the_crew(tmp_path, registered):
    cls = sp.LearnsFromPlanSpecialist
    cls.plans.clear()
    cls.replans.clear()
    cls.fixed = False
    registered("learns_from_plan", cls())
    out = run_crew(tmp_path / "run", ["learns_from_plan"], max_iters=3, patience=5,
                   roofline_done=2.0)
    trace = read_trace(tmp_path / "run")
    fails = [e for e in trace if e["node"] == "execute" and e.get("ok") is False]
    # one candidate: three compiles under its plan, its author re-plans it, three more
    assert [e["iteration"] for e in fails] == [1] * 6
    assert "(try 3/3; its author re-plans it)" in fails[2]["summary"]
    assert "(try 3/3; abandoned)" in fails[5]["summary"]
    assert cls.replans == [False, False, True, False, False]
    # the crew-wide flag: iteration 2 plans first, with the crew's compile errors in hand
    assert cls.plans == [(2, "crew-compile-errors", True)]
    plan_events = [e for e in trace if e["node"] == "plan"]
    assert [e["iteration"] for e in plan_events] == [2]
    # ... and once a candidate compiles, iteration 3 codes without planning first
    ok = [e["iteration"] for e in trace if e["node"] == "execute" and e.get("ok") is True]
    assert 2 in ok and 3 in ok
    assert out["result"]["compile_errors"] == 1


@pytest.mark.slow  # a killed and a resumed crew run: about 23 s
def test_kill_9_then_resume_finishes_without_repeating_an_evaluation(tmp_path):
    run_dir = tmp_path / "run"
    env = {**os.environ, "KERNELCREW_REPS": "4"}
    cmd = [sys.executable, "-m", "kernelcrew.cli", "optimize", VADD, "--backend", "cpu",
           "--max-iters", "3", "--patience", "5", "--roofline-done", "2", "--no-memory",
           "--run-dir", str(run_dir), "--json"]
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, start_new_session=True)
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline:
        if any(e["node"] == "benchmark" for e in read_trace(run_dir)):
            break
        if proc.poll() is not None:
            pytest.fail(f"the run ended before it could be killed: {proc.stderr.read()}")
        time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGKILL)  # kill -9, workers included
    proc.wait()
    before = read_trace(run_dir)
    assert not any(e["node"] == "finalize" for e in before)
    res = subprocess.run([sys.executable, "-m", "kernelcrew.cli", "optimize", "--resume",
                          str(run_dir), "--json"], cwd=ROOT, env=env, capture_output=True,
                         text=True, timeout=400, check=False)
    assert res.returncode == 0, res.stderr
    result = json.loads(res.stdout)
    assert result["best"]["correct"] is True
    trace = read_trace(run_dir)
    assert sum(e["node"] == "finalize" for e in trace) == 1
    for node in ("verify", "benchmark"):
        done = Counter(e["refs"]["kernel"] for e in trace if e["node"] == node)
        assert done and max(done.values()) == 1, f"{node} repeated: {done}"
    assert sum(e["node"] == "baseline" for e in trace) == 1
