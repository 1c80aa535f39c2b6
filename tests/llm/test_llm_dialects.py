"""Servers' dialects, each scripted the way a real server behaves, through the real
ChatOpenAI client: which form of the output cap it reads, a schema refusal as HTTP 500,
its tokenizer and context size, a chat template that drops system messages, one slot."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest

from kernelcrew.agents.llm import LLMClient, LLMSettings, PromptTooLarge, make_specialist
from kernelcrew.agents.llm.specialists import PlanAnswer
from tests.llm.conftest import settings_for
from tests.llm.scripted_server import answer, delayed
from tests.llm.scripts import FAST_VADD, PLAN, code, vadd_context

LONG_PLAN = {**PLAN, "plan": "1. Mark x, z, y __restrict__. " * 60}  # ~450 tokens of JSON


def plan_agent(srv, tmp_path: Path, **over):
    return make_specialist("memory_access", settings=settings_for(srv, **over),
                           run_dir=str(tmp_path))


@pytest.mark.parametrize("reads", ["max_tokens", "max_completion_tokens"])
def test_the_output_cap_holds_on_a_server_that_reads_only_one_form(serve, tmp_path, reads):
    srv = serve({("memory_access", "plan"): [answer(LONG_PLAN), answer(LONG_PLAN)]},
                reads_cap=reads)
    a = plan_agent(srv, tmp_path, max_tokens=64)
    props = a.propose(vadd_context(run_dir=str(tmp_path)))
    assert props == []
    plans = srv.calls("memory_access", "plan")
    assert len(plans) == 2  # the answer and its one repair
    for ex in plans:
        assert ex.request.get(reads) == 64  # the form this server reads was sent
        assert ex.usage["completion_tokens"] <= 64  # ... and the cap held
    # both cut-off answers are accounted for as truncated, each with its reason
    kinds = [(x["step"], x["kind"]) for x in a.last_answers]
    assert kinds == [("plan", "truncated"), ("plan", "truncated")]
    assert "cut off at the output token limit" in a.last_answers[0]["reason"]


def test_a_json_schema_refusal_as_http_500_falls_back_at_once(serve, tmp_path):
    srv = serve({("memory_access", "plan"): [answer(PLAN)],
                 ("memory_access", "code"): [answer(code())]},
                refuse={"json_schema"}, refuse_status=500)
    slept: list[float] = []
    a = plan_agent(srv, tmp_path, retries=3, backoff_s=5.0)
    a._begin(vadd_context(run_dir=str(tmp_path)))
    a._client.sleep = slept.append
    (p,) = a.propose(vadd_context(run_dir=str(tmp_path)))
    assert p.change.kernel == FAST_VADD
    # one refused json_schema request, then function calling for the rest: no retry, no wait
    assert [(e.mode, e.status) for e in srv.exchanges] == [
        ("json_schema", 500), ("tools", 200), ("tools", 200)]
    assert slept == []
    rec = json.loads(Path(a.last_prompt_files[0]).read_text())
    assert "validation error" in rec["attempts"][0]["error"] and "500" in rec["attempts"][0][
        "error"]


def test_prompt_tokens_come_from_the_server_tokenizer_and_the_context_from_props(
        serve, tmp_path):
    srv = serve({("memory_access", "plan"): [answer(PLAN)]}, tokenize=True,
                props={"default_generation_settings": {"n_ctx": 900}, "total_slots": 1})
    s = LLMSettings.resolve(settings_for(srv, max_tokens=200))
    c = LLMClient(s, agent="memory_access", run_dir=str(tmp_path))
    from langchain_core.messages import HumanMessage, SystemMessage

    msgs = [SystemMessage("You are the kernelcrew memory_access specialist."),
            HumanMessage("STEP: plan\n" + "tiny context " * 10)]
    assert c.ask(msgs, PlanAnswer, step="plan") is not None
    assert c.endpoint.context == 900 and c.endpoint.context_source == "/props"
    assert c.endpoint.tokenize_path == "/tokenize" and c.endpoint.slots == 1
    rec = json.loads(Path(c.files[0]).read_text())
    assert rec["fit"]["counted_by"] == "server tokenizer" and rec["fit"]["context"] == 900

    # a prompt that cannot fit 900 - 200 tokens is refused before anything is sent
    sent = len(srv.exchanges)
    big = [msgs[0], HumanMessage("STEP: plan\n" + "word " * 3000)]
    with pytest.raises(PromptTooLarge) as e:
        c.ask(big, PlanAnswer, step="plan")
    assert len(srv.exchanges) == sent
    line = str(e.value)
    assert "\n" not in line and "900 tokens" in line and "(/props)" in line
    assert f"needs {e.value.prompt_tokens} tokens" in line


def test_a_context_too_small_for_the_rules_stops_before_the_first_request(serve, tmp_path):
    srv = serve({("memory_access", "plan"): [answer(PLAN)]},
                props={"default_generation_settings": {"n_ctx": 600}})
    a = plan_agent(srv, tmp_path, max_tokens=256)
    with pytest.raises(PromptTooLarge) as e:
        a.propose(vadd_context(run_dir=str(tmp_path)))
    assert srv.exchanges == []  # nothing was sent
    assert "600 tokens" in str(e.value) and "needs" in str(e.value)


def test_the_context_is_trimmed_to_fit_a_small_window(serve, tmp_path):
    srv = serve({("memory_access", "plan"): [answer(PLAN)],
                 ("memory_access", "code"): [answer(code())]},
                props={"default_generation_settings": {"n_ctx": 2600}})
    a = plan_agent(srv, tmp_path, max_tokens=300)
    busy = vadd_context(run_dir=str(tmp_path),
                        reflections=[f"reflection {i}: " + "restrict helped. " * 20
                                     for i in range(12)],
                        tried=[f"old{i} by loop: slower" for i in range(60)])
    (p,) = a.propose(busy)
    assert p.change.kernel == FAST_VADD
    assert a.last_context["trimmed"]  # something had to go
    for ex in srv.exchanges:
        rec_tokens = (len("".join(m["content"] for m in ex.request["messages"])) + 2) // 3
        assert rec_tokens + 300 <= 2600


def test_the_context_size_is_learned_from_the_servers_400_and_the_prompt_shrunk(
        serve, tmp_path):
    srv = serve({("memory_access", "plan"): [answer(PLAN)],
                 ("memory_access", "code"): [answer(code())]}, n_ctx=2500)
    a = plan_agent(srv, tmp_path, max_tokens=200)
    busy = vadd_context(run_dir=str(tmp_path),
                        reflections=[f"reflection {i}: " + "restrict helped. " * 30
                                     for i in range(14)])
    (p,) = a.propose(busy)
    assert p.change.kernel == FAST_VADD
    assert [e.status for e in srv.exchanges][:2] == [400, 200]  # refused once, then it fit
    assert a._client.endpoint.context == 2500
    assert a._client.endpoint.context_source == "400 message"


def test_a_template_that_drops_system_messages_is_detected_and_worked_around(serve, tmp_path):
    srv = serve({("memory_access", "plan"): [answer(PLAN)],
                 ("memory_access", "code"): [answer(code())]}, drops_system=True)
    a = plan_agent(srv, tmp_path, structured_output="json_mode")
    (p,) = a.propose(vadd_context(run_dir=str(tmp_path)))
    assert p.change.kernel == FAST_VADD
    assert a._client.endpoint.system_dropped is True
    assert len(srv.probes) == 2  # with and without a system message
    for ex in srv.exchanges:
        assert not [m for m in ex.request["messages"] if m["role"] == "system"]
        # the rules and the JSON schema reached the model, in the user message
        assert "Rules for every kernelcrew agent" in ex.user
        assert "\"title\":\"PlanAnswer\"" in ex.user or "\"title\":\"CodeAnswer\"" in ex.user


def test_a_template_that_keeps_them_gets_one_system_message(serve, tmp_path):
    srv = serve({("memory_access", "plan"): [answer(PLAN)],
                 ("memory_access", "code"): [answer(code())]})
    a = plan_agent(srv, tmp_path, structured_output="json_mode")
    a.propose(vadd_context(run_dir=str(tmp_path)))
    assert a._client.endpoint.system_dropped is False
    for ex in srv.exchanges:
        systems = [m for m in ex.request["messages"] if m["role"] == "system"]
        assert len(systems) == 1  # rules and the JSON-mode schema in one message
        assert "Rules for every kernelcrew agent" in systems[0]["content"]
        assert '"title":' in systems[0]["content"]


@pytest.mark.parametrize("how", ["setting", "props"])
def test_requests_per_endpoint_are_limited(serve, tmp_path, how):
    script = {(n, "plan"): [delayed(PLAN, 0.4)] for n in ("memory_access", "loop",
                                                          "compiler_flags")}
    script.update({(n, "code"): [answer(code())] for n in ("memory_access", "loop",
                                                            "compiler_flags")})
    kw = {"props": {"total_slots": 1}} if how == "props" else {}
    srv = serve(script, **kw)
    over = {"concurrency": 1} if how == "setting" else {}
    agents = [make_specialist(n, settings=settings_for(srv, timeout=10.0, **over),
                              run_dir=str(tmp_path)) for n in ("memory_access", "loop",
                                                               "compiler_flags")]
    out: list = []
    threads = [threading.Thread(target=lambda g=g: out.append(g.propose(
        vadd_context(run_dir=str(tmp_path))))) for g in agents]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert len(out) == 3 and all(len(p) == 1 for p in out)
    assert srv.max_inflight == 1
    # the time spent queued is on record, apart from the server's own time
    waits = [json.loads(Path(f).read_text())["attempts"][-1]["waited_s"]
             for g in agents for f in g.last_prompt_files]
    assert max(waits) >= 0.3


def test_a_kernel_with_another_signature_is_a_wrong_signature_answer(serve, tmp_path):
    wrong = FAST_VADD.replace("int64_t n", "int n")
    srv = serve({("memory_access", "plan"): [answer(PLAN)],
                 ("memory_access", "code"): [answer(code(wrong)), answer(code(wrong))]})
    a = plan_agent(srv, tmp_path)
    ctx = vadd_context(run_dir=str(tmp_path), entry_params=[
        {"name": "x", "kind": "input", "dtype": "float32"},
        {"name": "z", "kind": "input", "dtype": "float32"},
        {"name": "y", "kind": "output", "dtype": "float32"},
        {"name": "n", "kind": "size", "dtype": "int64"}])
    assert a.propose(ctx) == []
    kinds = [(x["step"], x["kind"]) for x in a.last_answers]
    assert kinds == [("plan", "usable"), ("code", "wrong_signature"),
                     ("code", "wrong_signature")]
    assert "parameter 4 of `vadd` (`int n`)" in a.last_answers[1]["reason"]
    assert "int64_t n" in srv.calls("memory_access", "code")[1].user  # told in the repair
