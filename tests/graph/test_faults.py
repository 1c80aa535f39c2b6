"""Faults during a run stay verdicts: a best kernel that fails its re-run is demoted and
the run goes on from the previous best; the wall-clock budget cuts inside an iteration.

Real runs of the graph on a small op (its baseline does the work sixteen times over, so a
plain loop is accepted on any machine), with test specialists registered from outside.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kernelcrew import build_graph
from kernelcrew.agents.proposal import Change, Proposal
from kernelcrew.agents.specialist import register_specialist, unregister_specialist
from kernelcrew.graph.build import RECURSION_LIMIT
from kernelcrew.trace import read_trace

OP = Path(__file__).resolve().parent / "ops" / "vadd_slow"
# A race is a duel: one worker per kernel runs every case (4 here): 2 verify calls (one
# per input set), 3 warm-ups, and 20 timed runs in RACE_ROUNDS batches, each batch of a
# warm case after one more warm-up: 27 calls a case, 108 in all. Observe's profile runs
# one case: 2 + 3 + 150 calls.
PROFILE_REPS = 150  # timed calls when observe profiles the best (KERNELCREW_REPS)
RACE_ROUNDS = 2
GOOD_CALLS = 130  # the flaky kernel is right for this many calls per process, then wrong

PLAIN = """/* kernelcrew
entry: vadd_slow
flags: [-O2]
*/
// plain loop
#include <cstdint>
extern "C" void vadd_slow(const float* x, const float* z, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] + z[i];
}
"""

# Right for its first GOOD_CALLS calls in a worker process, then off by one: it passes
# verification (one call per input set) and its race (a duel: all rounds in one worker),
# and fails when observe profiles it (PROFILE_REPS timed calls, all outputs of the last
# ones checked), as a kernel with a slow race or a counter overflow that passed once
# would.
FLAKY = f"""/* kernelcrew
entry: vadd_slow
flags: [-O2]
knobs: {{GOOD_CALLS: {GOOD_CALLS}}}
*/
// right for GOOD_CALLS calls per process, then wrong
#include <cstdint>
static int64_t calls = 0;
extern "C" void vadd_slow(const float* x, const float* z, float* y, int64_t n) {{
  const float off = ++calls > GOOD_CALLS ? 1.0f : 0.0f;
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] + z[i] + off;
}}
"""


class OneKernelSpecialist:
    """Proposes one fixed kernel whenever the best is not that kernel."""

    field = "proposes one fixed kernel (a test)"

    def __init__(self, name: str, kind: str, text: str) -> None:
        self.name, self.kind, self.text = name, kind, text

    def propose(self, ctx):
        if ctx.kernel.strip() == self.text.strip():
            return []
        return [Proposal(author=self.name, bottleneck="Test bottleneck.", plan="plain loop",
                         change=Change(type="source", kind=self.kind, kernel=self.text,
                                       regions=[self.kind]),
                         expected_gain=4.0, risks="none", confidence=0.9)]

    def revise(self, ctx, failed):
        return None


@pytest.fixture
def specialist():
    names = []

    def reg(name: str, kind: str, text: str) -> str:
        register_specialist(name, OneKernelSpecialist(name, kind, text), policy="heuristic")
        names.append(name)
        return name

    yield reg
    for n in names:
        unregister_specialist(n, policy="heuristic")


def run(run_dir: Path, names: list[str], **ctx) -> dict:
    return build_graph().invoke(
        {"operator": str(OP)}, {"recursion_limit": RECURSION_LIMIT},
        context={"backend": "cpu", "specialists": names, "reps": 20, "use_memory": False,
                 "run_dir": str(run_dir), "timeout_s": 20, **ctx})


@pytest.mark.slow  # a crew run with a re-profile that fails: about 14 s
def test_best_that_fails_its_re_profile_is_demoted_and_the_run_goes_on(
        tmp_path, specialist, monkeypatch):
    monkeypatch.setenv("KERNELCREW_REPS", str(PROFILE_REPS))  # observe's profile
    monkeypatch.setenv("KERNELCREW_ROUNDS", str(RACE_ROUNDS))  # the race's calls, above
    name = specialist("flaky_after_calls", "flaky", FLAKY)
    out = run(tmp_path / "run", [name], max_iters=2, patience=5, roofline_done=2.0)
    res = out["result"]
    evals = [(e["iteration"], e["outcome"]) for e in out["evaluations"]]
    # iteration 1: accepted (right in verify and in every race round); iteration 2:
    # demoted when observe profiled it
    assert evals[0] == (1, "accepted"), out["evaluations"]
    assert (2, "demoted") in evals, out["evaluations"]
    demoted = next(e for e in out["evaluations"] if e["outcome"] == "demoted")
    assert "failed its re-run (re-profiled by observe)" in demoted["detail"], demoted
    assert "not correct" in demoted["detail"] and "outside tolerance" in demoted["detail"]
    # the run finished from the previous best (the baseline), correct, and says why
    assert res["iterations"] == 2 and res["stop_reason"] == "max iterations (2)", res
    assert res["best"]["author"] == "baseline" and res["best"]["correct"] is True, res["best"]
    assert [e["path"] for e in res["demoted"]] == [demoted["path"]]
    assert Path(res["best"]["path"]).read_text() == (OP / "baseline.cpp").read_text()
    trace = read_trace(tmp_path / "run")
    dem = [e for e in trace if e["node"] == "demote"]
    assert len(dem) == 1 and dem[0]["iteration"] == 2, dem
    assert "outside tolerance" in dem[0]["reason"] and dem[0]["best"].endswith("baseline.cpp")
    # observe went on with the previous best: its profile of iteration 2 is the baseline's
    obs = [e for e in trace if e["node"] == "observe" and e.get("iteration") == 2]
    assert obs and "profile unavailable" not in obs[0]["summary"], obs
    assert not [e for e in trace if e["node"] == "report" and e.get("ok") is False]


def test_wall_clock_budget_is_checked_before_each_evaluation(tmp_path, specialist):
    """A budget spent during the iteration (here: already by its profile) stops the next
    evaluation from starting; the candidate is recorded as not evaluated, with why."""
    name = specialist("plain_loop", "plain", PLAIN)
    out = run(tmp_path / "run", [name], max_iters=3, patience=5, wall_budget_s=0.01)
    res = out["result"]
    assert [(e["iteration"], e["outcome"]) for e in out["evaluations"]] == \
        [(1, "not-evaluated")], out["evaluations"]
    assert out["evaluations"][0]["detail"] == \
        "wall-clock budget of 0 s spent before its verify started"
    trace = read_trace(tmp_path / "run")
    assert [e for e in trace if e["node"] == "execute" and e.get("ok")], "it was compiled"
    assert not [e for e in trace if e["node"] == "verify" and "correct" in e]
    assert not [e for e in trace if e["node"] == "benchmark" and "verdict" in e]
    assert res["iterations"] == 1 and res["stop_reason"].startswith("wall-clock budget"), res
    assert res["best"]["author"] == "baseline"


# Threaded, one thread per CPU it may run on (it sizes its team itself), with a bug that
# shows only with more than one thread (each thread adds its own number: an offset meant
# for a per-thread scratch index). Right while the machine gives the run one core; wrong
# once it gives two.
THREADED_BUG = """/* kernelcrew
entry: vadd_slow
flags: [-O2, -fopenmp]
*/
// threaded; wrong with more than one thread
#include <cstdint>
#include <omp.h>
extern "C" void vadd_slow(const float* x, const float* z, float* y, int64_t n) {
#pragma omp parallel num_threads(omp_get_num_procs())
  {
    const float off = (float)omp_get_thread_num();
#pragma omp for
    for (int64_t i = 0; i < n; ++i) y[i] = x[i] + z[i] + off;
  }
}
"""


def _set_affinity(cpus: set[int]) -> None:
    """For every thread of this process (the graph may run nodes in worker threads):
    workers inherit it, and the CPU backend gives a kernel one thread per CPU in it."""
    for tid in Path("/proc/self/task").iterdir():
        try:
            os.sched_setaffinity(int(tid.name), cpus)
        except (ProcessLookupError, PermissionError):
            pass


class GrowsTheMachine(OneKernelSpecialist):
    """Proposes THREADED_BUG; once it is the best (observe profiled it, still on one
    core), gives the run every core again and proposes the plain loop."""

    def __init__(self, all_cpus: set[int]) -> None:
        super().__init__("threaded_then_plain", "threads", THREADED_BUG)
        self.all_cpus = all_cpus

    def propose(self, ctx):
        if ctx.kernel.strip() == THREADED_BUG.strip():
            _set_affinity(self.all_cpus)
            return [Proposal(author=self.name, bottleneck="Test bottleneck.", plan="plain loop",
                             change=Change(type="source", kind="plain", kernel=PLAIN,
                                           regions=["plain"]),
                             expected_gain=1.0, risks="none", confidence=0.5)]
        return super().propose(ctx)


@pytest.mark.slow  # two iterations with profiles: about 1.5 min on 2 loaded cores
@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2 if hasattr(os, "sched_getaffinity")
                    else True, reason="needs two CPUs this process may run on")
def test_threaded_best_that_fails_as_the_incumbent_is_demoted(tmp_path):
    """A threaded kernel accepted while the run had one core fails its next race as the
    incumbent once the run has two: demoted, and the candidate of that race is raced
    against the previous best (the baseline) instead, and accepted."""
    all_cpus = set(os.sched_getaffinity(0))
    spec = GrowsTheMachine(all_cpus)
    register_specialist(spec.name, spec, policy="heuristic")
    _set_affinity({min(all_cpus)})
    try:
        out = run(tmp_path / "run", [spec.name], max_iters=2, patience=5,
                  roofline_done=2.0)
    finally:
        _set_affinity(all_cpus)
        unregister_specialist(spec.name, policy="heuristic")
    res = out["result"]
    got = [(e["iteration"], e["kind"], e["outcome"]) for e in out["evaluations"]]
    assert got == [(1, "threads", "accepted"), (2, "threads", "demoted"),
                   (2, "plain", "accepted")], out["evaluations"]
    demoted = out["evaluations"][1]
    assert demoted["detail"].startswith("failed its re-run (re-timed as the incumbent): "), \
        demoted
    assert "outside tolerance" in demoted["detail"], demoted
    trace = read_trace(tmp_path / "run")
    dem = [e for e in trace if e["node"] == "demote"]
    assert len(dem) == 1 and dem[0]["where"] == "re-timed as the incumbent", dem
    # the plain loop was raced against the baseline (the previous best), not the demoted one
    races = [e for e in trace if e["node"] == "benchmark" and e.get("iteration") == 2
             and "verdict" in e]
    assert len(races) == 1 and races[0]["verdict"] == "faster", races
    assert res["best"]["kind"] == "plain" and res["best"]["correct"] is True, res["best"]
    assert res["best"]["speedup"] > 1 and [e["kind"] for e in res["demoted"]] == ["threads"]
