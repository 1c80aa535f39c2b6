"""The LLM crew in the loop, end to end: the real CLI, graph, compiler and judge on the CPU;
only the LLM is scripted. A model that only names moves gets one accepted; the critic
says why a candidate lost and its author reads it next; a specialist whose prompt cannot
fit sits out while the others go on; the heuristic coordinator steps in when the LLM one
fails; memory keeps no endpoint errors; the writer is counted in the cost budget."""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

import pytest

from kernelcrew.agents.transforms import apply_transform
from kernelcrew.memory.store import MemoryStore
from tests.conftest import kernelcrew
from tests.llm.conftest import API_KEY
from tests.llm.scripted_server import answer, error
from tests.llm.scripts import PLAN, code
from tests.llm.test_llm_graph import trace

HERE = Path(__file__).resolve().parent
EXPMUL = HERE / "ops" / "expmul"
BASELINE = (EXPMUL / "baseline.cpp").read_text()
ENV = {"OPENAI_API_KEY": API_KEY, "KERNELCREW_LLM_MODEL": "scripted",
       "KERNELCREW_LLM_BACKOFF": "0.01", "KERNELCREW_LLM_RETRIES": "1"}
# the add done three times through a volatile: correct, and far slower than the baseline
SLOWER = BASELINE.replace(
    "  for (int64_t i = 0; i < n; ++i) y[i] = std::exp(x[i]) * g[i];",
    "  for (int r = 0; r < 3; ++r)\n    for (int64_t i = 0; i < n; ++i) {\n"
    "      volatile float t = std::exp(x[i]); y[i] = t * g[i];\n    }")
assert SLOWER != BASELINE


def crew(base_url: str, op: Path | str, *args: str, env: dict | None = None,
         timeout: float = 600):
    os.environ.pop("OPENAI_BASE_URL", None)
    return kernelcrew("optimize", str(op), "--base-url", base_url, "--reps", "4", "--json",
                      "--roofline-done", "2", *args, env={**ENV, **(env or {})},
                      timeout=timeout)


def result(p) -> dict:
    assert "Traceback" not in p.stderr, p.stderr[-3000:]
    assert p.stdout.strip(), f"exit {p.returncode}: {p.stderr[-2000:]}"
    return json.loads(p.stdout)


@pytest.mark.slow  # a crew run: about 20 s
def test_a_model_that_only_names_moves_gets_one_accepted(serve):
    srv = serve({("loop", "plan"): [answer({**PLAN, "kind": "vector_math",
                                            "bottleneck": "A scalar libm exp per element."})],
                 ("loop", "code"): [answer({"moves": [{"move": "vector_math"}]})]})
    res = result(crew(srv.base_url, EXPMUL, "--agents", "llm", "--specialists", "loop",
                      "--max-iters", "1", "--no-memory"))
    assert res["best"]["author"] == "loop" and res["best"]["correct"] is True
    assert res["best"]["kind"] == "vector_math"
    # the accepted kernel is the catalogue's own rewrite, as the heuristic crew makes it
    assert Path(res["best"]["path"]).read_text() == apply_transform("vector_math", BASELINE)
    assert res["answer_forms"] == {"moves": 1}
    (acc,) = res["accepted"]
    prop = json.loads(Path(acc["path"]).with_suffix("").with_suffix(".proposal.json")
                      .read_text())
    assert prop["change"]["transform"] == "vector_math" and prop["estimate"] == "model"
    # the model saw the moves, the contract and the rule-based specialist's pick
    user = srv.calls("loop", "plan")[0].user
    assert "vector_math: float exp/erf calls in loops" in user
    assert "[the rule-based specialist proposes it]" in user
    assert "x: float32[n] (input)" in user and "shape group typical (weight 1)" in user


@pytest.mark.slow  # two iterations of a crew run: about 60 s
def test_the_critic_says_why_a_candidate_lost_and_its_author_reads_it_next(serve):
    said: list[str] = []

    def critic(ex):
        if not said:  # a fine-sounding critique that cites no number: sent back once
            said.append("vague")
            return answer({"why": "It lost because the loop got worse."})
        vs = re.search(r"it lost, ([\d.]+)x vs the best", ex.user).group(1)
        said.append(vs)
        return answer({"why": f"At {vs}x vs the best, the volatile store three times over "
                              "triples the work per element."})

    srv = serve({("memory_access", "plan"): [answer(PLAN), answer(PLAN)],
                 ("memory_access", "code"): [answer(code(SLOWER)), answer(code(SLOWER.replace(
                     "r < 3", "r < 2")))]},
                default=lambda ex: critic(ex) if ex.agent == "critic"
                else error(418, "unscripted"))
    res = result(crew(srv.base_url, EXPMUL, "--agents", "specialists=llm,critic=llm",
                      "--specialists", "memory_access", "--max-iters", "2", "--patience", "3",
                      "--no-memory"))
    ev = trace(res["run_dir"])
    crit = [e for e in ev if e["node"] == "critique"]
    assert [e["outcome"] for e in crit] == ["slower", "slower"]
    first = crit[0]
    assert first["by"] == "llm" and f"At {said[1]}x vs the best" in first["summary"]
    # the critic compared the candidate's profile with the best's (it was profiled)
    assert first["deltas"] and any(d[0] == "time_ms" for d in first["deltas"])
    assert "cites none of the measured numbers" in srv.calls("critic", "critique")[1].user
    facts = srv.calls("critic", "critique")[0].user
    assert "Per shape group, speedup vs the best: typical" in facts
    assert "Profile, candidate vs best:" in facts
    # iteration 2: the author reads why its candidate lost
    plan2 = srv.calls("memory_access", "plan")[1].user
    assert "## Your last candidate was not faster than the best: the critic's comparison" \
        in plan2
    assert f"At {said[1]}x vs the best" in plan2
    assert "## The critic on the last race" in plan2


@pytest.mark.slow  # a crew run with memory: about 40 s
def test_one_specialist_sits_out_the_llm_coordinator_fails_and_memory_stays_clean(
        serve, tmp_path):
    # loop's role prompt is far larger than the model's context: loop sits out
    prompts = tmp_path / "prompts"
    prompts.mkdir()
    (prompts / "loop.md").write_text("You are the kernelcrew loop specialist.\n"
                                     + "Think about loops. " * 6000)
    flags_only = BASELINE.replace("[-O3, -march=native]", "[-O3, -march=native, "
                                  "-fno-math-errno]")
    srv = serve({("memory_access", "plan"): [answer(PLAN)],
                 ("memory_access", "code"): [answer({"moves": [{"move": "vector_math"}]})],
                 ("compiler_flags", "plan"): [answer({**PLAN, "kind": "flags"})],
                 ("compiler_flags", "code"): [answer(code(flags_only, 1.1))]},
                default=error(500, "upstream exploded"))
    mem = tmp_path / "memory"
    res = result(crew(srv.base_url, EXPMUL, "--agents",
                      "specialists=llm,coordinator=llm,reflector=llm", "--specialists",
                      "memory_access,loop,compiler_flags", "--max-iters", "1",
                      "--memory-dir", str(mem),
                      env={"KERNELCREW_PROMPTS_DIR": str(prompts),
                           "KERNELCREW_LLM_CONTEXT_WINDOW": "16000"}))
    ev = trace(res["run_dir"])
    loop = next(e for e in ev if e["node"] == "specialist" and e["agent"] == "loop")
    assert loop["summary"].startswith("loop sits out this iteration: the loop plan prompt "
                                      "needs") and "context is 16000 tokens" in loop["summary"]
    assert not srv.calls("loop")  # nothing was sent for it
    # the LLM coordinator failed (500s): the heuristic one chose among both proposals
    coord = next(e for e in ev if e["node"] == "coordinator")
    assert "(LLM coordinator unavailable: " in coord["decision"]
    assert "upstream exploded" in coord["decision"] and len(coord["candidates"]) >= 1
    assert not res["halted"] and "could not continue" not in res["stop_reason"]
    assert res["best"]["author"] in ("memory_access", "memory_access+compiler_flags",
                                     "compiler_flags+memory_access")
    # the reflector's endpoint failed too: the trace says so, memory does not
    refl = [e for e in ev if e["node"] == "reflect"]
    assert refl and all("upstream exploded" in (e.get("llm_unusable") or "") for e in refl[:1])
    stored = MemoryStore.open(path=str(mem)).list()
    assert stored
    for r in stored:
        assert "upstream exploded" not in r.text and srv.base_url not in r.text
        assert "HTTP 500" not in r.text


WRITER_PLAN = {**PLAN, "bottleneck": "One exp per element.", "plan": "1. One loop.",
               "kind": "first_kernel", "expected_gain": 1.0}


@pytest.mark.slow  # the writer and one specialist call: about 30 s
def test_the_writer_is_counted_in_the_cost_budget(serve, tmp_path):
    op = tmp_path / "expmul_ref"
    op.mkdir()
    shutil.copy(EXPMUL / "reference.py", op / "reference.py")
    (op / "op.yaml").write_text((EXPMUL / "op.yaml").read_text().replace(
        "baselines: {cpu: baseline.cpp}\n", ""))
    srv = serve({("writer", "plan"): [answer(WRITER_PLAN)],
                 ("writer", "code"): [answer(code(BASELINE, 1.0))],
                 ("memory_access", "plan"): [answer(PLAN)],
                 ("memory_access", "code"): [answer(code())]})
    # at $1000 per million tokens both ways the writer's two calls cost about $3; the
    # specialist's first call could cost more than what is left of $5
    res = result(crew(srv.base_url, op, "--agents", "llm", "--specialists",
                      "memory_access", "--max-iters", "1", "--no-memory", "--price-in",
                      "1000", "--price-out", "1000", "--cost-budget", "5",
                      "--max-tokens", "300"))
    assert res["baseline_written_by"] == "writer"
    writer = res["usage_by_agent"]["writer"]
    assert writer["calls"] == 2 and writer["cost_usd"] > 0
    assert [e.agent for e in srv.exchanges] == ["writer", "writer"]  # the plan was not sent
    reason = res["stop_reason"]
    assert reason.startswith("cost budget of $5 reached: ") and "memory_access plan" in reason
    assert f"${writer['cost_usd']:.4f} spent" in reason
