"""`kernelcrew optimize --agents llm` end to end: the real CLI in a subprocess, the real graph,
compiler and harness; only the LLM is scripted (a local OpenAI-compatible server).

The operator is tests/llm/ops/vadd_slow: vadd with a baseline that does the add eight
times through a volatile, so the scripted kernel (restrict + -O3 -march=native) wins by far
more than the noise band of a loaded 2-core machine.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.conftest import kernelcrew
from tests.llm.conftest import API_KEY
from tests.llm.scripted_server import answer, hang
from tests.llm.scripts import BROKEN_VADD, FAST_VADD, PLAN, code

OP = str(Path(__file__).resolve().parent / "ops" / "vadd_slow")
ENV = {"OPENAI_API_KEY": API_KEY, "KERNELCREW_LLM_MODEL": "scripted",
       "KERNELCREW_LLM_BACKOFF": "0.01"}


def optimize(base_url: str, *extra: str, env: dict | None = None, timeout: float = 240):
    os.environ.pop("OPENAI_BASE_URL", None)  # the endpoint must come from --base-url
    return kernelcrew("optimize", OP, "--agents", "llm", "--base-url", base_url,
                      "--max-iters", "1", "--reps", "4", "--no-memory", "--json",
                      "--specialists", "memory_access", *extra, env={**ENV, **(env or {})},
                      timeout=timeout)


def trace(run_dir: str) -> list[dict]:
    return [json.loads(ln) for ln in (Path(run_dir) / "trace.jsonl").read_text().splitlines()]


@pytest.mark.slow  # a crew run: about 17 s
def test_an_llm_written_kernel_is_accepted_after_a_compile_error_is_fixed(serve):
    srv = serve({("memory_access", "plan"): [answer(PLAN)],
                 ("memory_access", "code"): [answer(code(BROKEN_VADD)), answer(code())]})
    p = optimize(srv.base_url, "--structured-output", "function_calling",
                 "--temperature", "0.1", "--llm-timeout", "30")
    assert p.returncode == 0, p.stderr[-3000:]
    assert "Traceback" not in p.stderr
    res = json.loads(p.stdout)
    run = Path(res["run_dir"])

    # the LLM's kernel was accepted and is the best kernel on disk (else: what the judge said)
    said = [f"{e['node']}: {e['summary']}" for e in trace(res["run_dir"])
            if e["node"] in ("execute", "verify", "benchmark", "gate")]
    assert res["best"]["author"] == "memory_access" and res["best"]["correct"] is True, said
    assert Path(res["best"]["path"]).read_text() == FAST_VADD
    assert [a["author"] for a in res["accepted"]] == ["memory_access"]

    # plan, broken code, then the fix: the compiler's errors reached the author
    assert [(e.step, e.status) for e in srv.exchanges] == [
        ("plan", 200), ("code", 200), ("code", 200)]
    fix = srv.exchanges[2].user
    assert "Compile errors of your last candidate (attempt 1 of 3)" in fix
    assert "line 8: error: expected" in fix and BROKEN_VADD.strip() in fix  # g++'s own words
    events = trace(res["run_dir"])
    assert any(e["node"] == "execute" and e.get("ok") is False for e in events)
    assert any(e["node"] == "revise" and e["agent"] == "memory_access" for e in events)

    # the CLI flags reached the client: method, temperature, model
    assert {e.mode for e in srv.exchanges} == {"tools"}
    assert {e.request.get("temperature") for e in srv.exchanges} == {0.1}
    assert {e.request["model"] for e in srv.exchanges} == {"scripted"}

    # token counts in the result are exactly what the server reported
    assert res["tokens"] == {**srv.reported_usage(), "calls": 3}

    # the prompts sent are in the trace: each specialist event names its record
    spec = next(e for e in events if e["node"] == "specialist")
    rec = json.loads(Path(spec["prompt_file"]).read_text())
    assert Path(spec["prompt_file"]).parent == run / "llm"
    assert rec["messages"][0]["content"] == srv.exchanges[1].system
    assert "Adding kernels the launch plan does not declare" in rec["messages"][0]["content"]
    # the context budget is reported: tokens used of the budget, what was trimmed
    assert spec["context"]["budget"] == 6000 and 0 < spec["context"]["tokens"] <= 6000
    assert sorted(f.name for f in (run / "llm").iterdir()) == [
        "01-memory_access-0.json", "01-memory_access-1.json", "01-memory_access-2.json"]

    # the API key is nowhere in the run directory
    for f in run.rglob("*"):
        if f.is_file() and f.suffix != ".sqlite":
            assert API_KEY not in f.read_text(errors="replace"), f
    assert API_KEY.encode() not in (run / "checkpoints.sqlite").read_bytes()


@pytest.mark.slow  # a crew run that waits out its timeouts: about 15 s
def test_an_endpoint_that_never_answers_stops_the_run_cleanly_with_the_best_kernel(serve):
    srv = serve(default=hang())
    p = optimize(srv.base_url, "--llm-timeout", "1", env={"KERNELCREW_LLM_RETRIES": "1"})
    assert "Traceback" not in p.stderr
    res = json.loads(p.stdout)  # --json: one document on stdout, even for a stopped run
    assert "could not continue" in res["stop_reason"] and srv.base_url in res["stop_reason"]
    assert "timed out" in res["stop_reason"]
    # the best kernel (the baseline here) is saved
    best = Path(res["best"]["path"])
    assert best.read_text() == (Path(OP) / "baseline.cpp").read_text()
    assert res["best"]["correct"] is True
    # one clear line on stderr, and a failed run's exit code
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and srv.base_url in lines[0], p.stderr
    assert p.returncode == 1
    assert len(srv.exchanges) == 2  # the request and its one retry, nothing more


def test_agents_llm_against_an_unreachable_endpoint_exits_with_one_clear_line(closed_port):
    url = f"http://127.0.0.1:{closed_port}/v1"
    p = optimize(url, timeout=60)
    assert p.returncode in (1, 2), (p.returncode, p.stderr)
    assert "Traceback" not in p.stderr
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, p.stderr
    assert url in lines[0] and "unreachable" in lines[0]
    assert p.stdout.strip() == ""
