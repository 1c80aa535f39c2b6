"""`kernelcrew optimize --agents llm` end to end (the real CLI, graph, compiler and harness;
only the LLM is scripted): unusable answers are visible, budgets stop the run, and a
recorded run replays with no endpoint."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from kernelcrew.agents.llm.prompts import PROMPTS_DIR
from tests.llm.scripted_server import answer, raw
from tests.llm.scripts import FAST_VADD, PLAN, code
from tests.llm.test_llm_graph import optimize, trace


def test_a_run_where_every_answer_is_malformed_says_so_and_names_the_agents(serve):
    srv = serve(default=raw('{"bottleneck": "the loop is scal'))  # half a JSON object
    p = optimize(srv.base_url, "--specialists", "memory_access,loop", "--max-iters", "2")
    assert "Traceback" not in p.stderr, p.stderr[-2000:]
    res = json.loads(p.stdout)
    reason = res["stop_reason"]
    assert "nothing usable" in reason and "memory_access: 2 malformed" in reason
    assert "loop: 2 malformed" in reason
    assert res["iterations"] == 1  # no second iteration of the same
    # every answer is an event in the trace: agent, step, kind, a short reason
    answers = [e for e in trace(res["run_dir"]) if e["node"] == "answer"]
    assert len(answers) == len(srv.exchanges) == 4
    assert {(e["agent"], e["step"], e["kind"]) for e in answers} == {
        ("memory_access", "plan", "malformed"), ("loop", "plan", "malformed")}
    assert all("not valid JSON" in e["reason"] for e in answers)
    assert [e["repair"] for e in answers].count(True) == 2  # each agent's one repair
    # ... and the specialist events say why there is no proposal
    spec = [e for e in trace(res["run_dir"]) if e["node"] == "specialist"]
    assert all("no usable answer (2 malformed)" in e["summary"] for e in spec)
    # ... and the totals are in result.json, per kind and per agent
    assert res["answers"]["total"] == 4 and res["answers"]["malformed"] == 4
    assert res["answers"]["usable"] == 0
    assert res["answers_by_agent"]["loop"]["answers"] == {"malformed": 2}
    assert res["best"]["author"] == "baseline" and res["best"]["correct"] is True
    # ... and the repair's own rejection is in its record
    rec = json.loads(Path(answers[-1]["refs"]["record"]).read_text())
    assert rec["answer"] == "malformed" and "not valid JSON" in rec["error"]


def test_a_call_that_would_go_over_the_token_budget_is_not_made(serve):
    srv = serve({("memory_access", "plan"): [answer(PLAN)] * 3,
                 ("memory_access", "code"): [answer(code())] * 3})
    p = optimize(srv.base_url, "--max-iters", "3", "--token-budget", "500",
                 "--price-in", "2", "--price-out", "8")
    assert "Traceback" not in p.stderr, p.stderr[-2000:]
    res = json.loads(p.stdout)
    # the first plan alone could take more than 500 tokens: it was never sent
    assert srv.exchanges == []
    reason = res["stop_reason"]
    assert reason.startswith("token budget of 500 reached: 0 tokens used, the next call "
                             "(memory_access plan) could take up to ") and "not made" in reason
    assert res["best"]["author"] == "baseline" and res["best"]["correct"] is True
    assert res["answers"]["total"] == 0 and not res["tokens"].get("total_tokens")


@pytest.mark.slow  # three runs of the crew
def test_a_recorded_run_replays_with_no_endpoint_and_reports_a_changed_prompt(
        serve, tmp_path, monkeypatch):
    srv = serve({("memory_access", "plan"): [answer(PLAN)],
                 ("memory_access", "code"): [answer(code())]})
    p = optimize(srv.base_url)
    assert p.returncode == 0, p.stderr[-2000:]
    first = json.loads(p.stdout)
    srv.stop()  # no endpoint from here on

    from tests.conftest import kernelcrew

    env = {"OPENAI_API_KEY": "", "OPENAI_BASE_URL": "", "KERNELCREW_LLM_MODEL": ""}
    p = kernelcrew("optimize", "--replay", first["run_dir"], "--json", env=env, timeout=240)
    assert p.returncode == 0, p.stderr[-2000:]
    again = json.loads(p.stdout)
    assert again["run_dir"] != first["run_dir"]

    def decisions(res: dict) -> list:
        ev = trace(res["run_dir"])
        cands = [Path(c).read_text() for e in ev if e["node"] == "coordinator"
                 for c in e["candidates"]]
        verdicts = [(e["node"], e.get("correct"), e.get("verdict"), e.get("accepted") is not None)
                    for e in ev if e["node"] in ("verify", "benchmark", "gate")]
        return [cands, verdicts, Path(res["best"]["path"]).read_text(), res["best"]["author"]]

    assert decisions(again) == decisions(first)
    assert again["answers"]["usable"] == first["answers"]["usable"] == 2
    replayed = [e for e in trace(again["run_dir"]) if e["node"] == "answer"]
    assert replayed and all(e["replayed"] for e in replayed)

    # a changed prompt template: the replay says what differs, then stops cleanly
    prompts = tmp_path / "prompts"
    shutil.copytree(PROMPTS_DIR, prompts)
    step = prompts / "step_plan.md"
    step.write_text(step.read_text().replace("Plan before code.",
                                             "Plan before code, and think of caches."))
    p = kernelcrew("optimize", "--replay", first["run_dir"], "--json",
                   env={**env, "KERNELCREW_PROMPTS_DIR": str(prompts)}, timeout=240)
    assert "Traceback" not in p.stderr
    res = json.loads(p.stdout)
    assert "no recorded answer for memory_access plan" in res["stop_reason"]
    assert "think of caches" in res["stop_reason"]
    miss = json.loads(next((Path(res["run_dir"]) / "llm").glob("*.json")).read_text())
    assert ("+Plan before code, and think of caches. Read the context above and answer with:"
            in miss["replay_miss"]["diff"])
    assert "-Plan before code. Read the context above and answer with:" in \
        miss["replay_miss"]["diff"]


@pytest.mark.slow  # a crew run: about 18 s
def test_a_wrong_result_goes_back_with_the_worst_elements_and_is_explained_first(serve):
    wrong = FAST_VADD.replace("y[i] = x[i] + z[i];",
                              "y[i] = x[i] + z[i] + (i == n - 1 ? 1.0f : 0.0f);")
    explain = {"cause": "the last element gets 1.0 added: a leftover term for i == n - 1",
               "fix": "remove the extra term"}
    srv = serve({("memory_access", "plan"): [answer(PLAN)],
                 ("memory_access", "code"): [answer(code(wrong)), answer(code())],
                 ("memory_access", "explain"): [answer(explain)]})
    p = optimize(srv.base_url)
    assert p.returncode == 0, p.stderr[-2000:]
    res = json.loads(p.stdout)
    assert [(e.step, e.status) for e in srv.exchanges] == [
        ("plan", 200), ("code", 200), ("explain", 200), ("code", 200)]
    ask = srv.exchanges[2].user
    # the worst elements: group and case, output, index, got, want, tolerance; the case by
    # what its size is like, never by the benchmark's size
    assert "Your last candidate was incorrect" in ask
    assert "rtol=1e-05, atol=1e-06" in ask
    # checking stops at the first failing case; the others are counted, not listed as wrong
    worst = re.findall(r"^- (\w+) case \d+[^:\n]*: wrong values: y\[(\d+)\] is ([-\d.e+]+), "
                       r"the reference says ([-\d.e+]+)", ask, re.MULTILINE)
    assert len(worst) == 1, ask
    group, _, got, want = worst[0]
    assert group in ("typical", "unaligned", "boundary")
    assert float(got) - float(want) == pytest.approx(1.0, abs=1e-4)  # the extra 1.0 of i == n-1
    assert "other case(s) not run" in ask and ": not run" not in ask
    assert not re.search(r"\bn ?= ?\d{2,}", ask), "a case's size reached the prompt"
    assert "explain where the error comes from" in ask
    # the explanation went into the fix request, and the fixed kernel was accepted
    assert explain["cause"] in srv.exchanges[3].user
    assert res["best"]["author"] == "memory_access"
    assert Path(res["best"]["path"]).read_text() == FAST_VADD
    assert res["candidates"]["wrong_result"] == 1 and res["candidates"]["accepted"] == 1
    rev = next(e for e in trace(res["run_dir"]) if e["node"] == "revise")
    assert rev["explanation"] == explain and "wrong result" in rev["summary"]


@pytest.mark.slow  # a crew run: about 19 s
def test_an_llm_reflector_stores_explanations_that_cite_the_measured_numbers(serve, tmp_path):
    import re

    from kernelcrew.memory.store import MemoryStore
    from tests.conftest import kernelcrew
    from tests.llm.test_llm_graph import ENV, OP

    said: list[str] = []

    def reflector(ex):
        if ex.agent != "reflector":
            return answer({"cause": "-", "fix": "-"})
        if not said:  # first: a fine-sounding answer with no measurement in it
            said.append("vague")
            return answer({"why": "It was faster because restrict helps.", "lesson": "Use it."})
        vs = re.search(r"Measured: ([\d.]+)x vs the best", ex.user).group(1)
        said.append(vs)
        return answer({"why": f"At {vs}x vs the best, the restrict change let g++ vectorize the "
                              "add; the loop now moves 16 bytes per instruction.",
                       "lesson": "On a scalar elementwise loop, try restrict first."})

    srv = serve({("memory_access", "plan"): [answer(PLAN)],
                 ("memory_access", "code"): [answer(code())]}, default=reflector)
    mem = tmp_path / "memory"
    p = kernelcrew("optimize", OP, "--agents", "specialists=llm,reflector=llm", "--base-url",
                   srv.base_url, "--max-iters", "1", "--reps", "4", "--json",
                   "--specialists", "memory_access", "--memory-dir", str(mem),
                   env=ENV, timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    res = json.loads(p.stdout)
    vs_best = res["accepted"][0]["vs_best"]
    # the vague answer was sent back once (it cited no number), the second cites one
    steps = [(e.agent, e.step) for e in srv.exchanges]
    assert steps.count(("reflector", "reflect")) == 2
    assert "cites none of the measured numbers" in srv.calls("reflector", "reflect")[1].user
    assert said[1] == f"{vs_best:.3f}"
    stored = MemoryStore.open(path=str(mem)).list()
    assert len(stored) == 1
    text = stored[0].text
    assert f"At {vs_best:.3f}x vs the best" in text and "Lesson: On a scalar" in text
    ev = next(e for e in trace(res["run_dir"]) if e["node"] == "reflect")
    assert ev["by"] == "llm" and ev["tokens"]["calls"] == 2
    kinds = [(e["agent"], e["kind"]) for e in trace(res["run_dir"]) if e["node"] == "answer"]
    assert ("reflector", "invalid") in kinds and ("reflector", "usable") in kinds


@pytest.mark.slow  # two iterations of three LLM specialists, the LLM coordinator and memory
def test_the_llm_coordinator_in_a_real_run_with_three_specialists_and_memory(serve, tmp_path):
    from tests.conftest import kernelcrew
    from tests.llm.test_llm_graph import ENV, OP

    calls: dict[str, int] = {}

    def llm(ex):
        n = calls[f"{ex.agent}/{ex.step}"] = calls.get(f"{ex.agent}/{ex.step}", 0) + 1
        if ex.step == "plan":
            return answer({**PLAN, "kind": f"{ex.agent}_change"})
        if ex.step == "code":  # each agent, each time: a correct kernel of its own
            return answer(code(FAST_VADD.replace(
                "#pragma GCC ivdep", f"// {ex.agent}, version {n}\n#pragma GCC ivdep")))
        if ex.step == "coordinate":
            return answer({"candidates": [[1], [2]], "rejected": ["3: same idea as 1"],
                           "reason": f"coordinator choice {n}: the two best-founded plans"})
        return answer({"why": "-", "lesson": "-"})

    srv = serve(default=llm)
    p = kernelcrew("optimize", OP, "--base-url", srv.base_url,
                   "--max-iters", "2", "--patience", "3", "--roofline-done", "2", "--reps", "4",
                   "--json",
                   "--candidates-per-iter", "2", "--memory-dir", str(tmp_path / "mem"),
                   "--agents", "specialists=llm,coordinator=llm", env=ENV, timeout=900)
    assert p.returncode == 0, p.stderr[-2000:]
    res = json.loads(p.stdout)
    assert res["iterations"] == 2
    ev = trace(res["run_dir"])
    coord = [e for e in ev if e["node"] == "coordinator"]
    assert [e["summary"].split(": ", 1)[1] for e in coord] == [
        "coordinator choice 1: the two best-founded plans",
        "coordinator choice 2: the two best-founded plans"]
    assert all(len(e["candidates"]) == 2 and e["tokens"]["calls"] == 1 for e in coord)
    for it in (1, 2):
        authors = {e["agent"] for e in ev if e["node"] == "specialist" and e["iteration"] == it}
        assert authors == {"memory_access", "loop", "compiler_flags"}
    # memory on: iteration 1's reflections reach iteration 2's prompts
    second = [e for e in srv.calls(step="plan") if "Relevant reflections (from memory)" in e.user]
    assert len(second) == 3
    assert res["answers"]["usable"] == res["answers"]["total"] == len(srv.exchanges)
