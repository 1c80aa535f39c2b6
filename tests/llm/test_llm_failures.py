"""Each failure named for its cause, with real servers' error texts, through the real
ChatOpenAI client against the scripted server: a refusal, the two forms of the output cap,
an unsupported temperature, a cap above the model's limit, any other 400, a library error
on a valid completion, and the hard token and cost budgets."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from langchain_core.messages import HumanMessage, SystemMessage

from kernelcrew.agents.llm import LLMClient, LLMSettings, LLMUnavailable, make_specialist
from kernelcrew.agents.llm.budget import BudgetSpent, forget_ledgers, ledger_for
from kernelcrew.agents.llm.failures import classify, refused_cap
from kernelcrew.agents.llm.schemas import PlanAnswer
from tests.llm.conftest import settings_for
from tests.llm.scripted_server import (
    OPENAI_CAP_TOO_LARGE,
    OPENAI_MAX_TOKENS,
    OPENAI_TEMPERATURE,
    answer,
    error,
    odd_content,
    refusal,
)
from tests.llm.scripts import FAST_VADD, PLAN, code, vadd_context


@pytest.fixture(autouse=True)
def _fresh_ledgers():
    forget_ledgers()
    yield
    forget_ledgers()


def agent(srv, tmp_path: Path, **over):
    return make_specialist("memory_access", settings=settings_for(srv, **over),
                           run_dir=str(tmp_path))


def client(srv, tmp_path: Path, **over) -> LLMClient:
    return LLMClient(LLMSettings.resolve(settings_for(srv, **over)), agent="memory_access",
                     run_dir=str(tmp_path))


def ask_plan(c: LLMClient) -> PlanAnswer | None:
    msgs = [SystemMessage("You are the kernelcrew memory_access specialist."),
            HumanMessage("STEP: plan\nPlan a change.")]
    return c.ask(msgs, PlanAnswer, step="plan")  # type: ignore[return-value]


def test_openais_max_tokens_refusal_is_read_the_right_way_round(serve, tmp_path):
    # OpenAI names both forms in one sentence; the refused one is max_tokens
    assert refused_cap(OPENAI_MAX_TOKENS) == "max_tokens"
    assert refused_cap("Unsupported parameter: 'max_completion_tokens' is not supported with "
                       "this model. Use 'max_tokens' instead.") == "max_completion_tokens"
    srv = serve({("memory_access", "plan"): [answer(PLAN)]},
                rejects={"max_tokens": (lambda v: True, OPENAI_MAX_TOKENS)})
    c = client(srv, tmp_path, max_tokens=300)
    assert isinstance(ask_plan(c), PlanAnswer)
    refused, ok = srv.exchanges
    assert refused.status == 400 and "max_tokens" in refused.request
    # from then on only the form the server reads, with the same cap
    assert ok.status == 200 and "max_tokens" not in ok.request
    assert ok.request["max_completion_tokens"] == 300
    rec = json.loads(Path(c.files[-1]).read_text())
    assert rec["attempts"][0]["kind"] == "cap-form"
    facts = json.loads((tmp_path / "llm-endpoint.json").read_text())
    assert "refuses max_tokens: the cap goes as max_completion_tokens" in facts["learned"]


def test_a_refusal_is_an_answer_of_its_own_kind_and_not_asked_again(serve, tmp_path):
    srv = serve({("memory_access", "plan"): [refusal(), answer(PLAN)]})
    a = agent(srv, tmp_path)
    assert a.propose(vadd_context(run_dir=str(tmp_path))) == []
    assert len(srv.exchanges) == 1  # no repair: a refusal is the model's decision
    (ans,) = a.last_answers
    assert ans["kind"] == "refused"
    assert "the model refused: I'm sorry, but I cannot assist" in ans["reason"]
    assert "refused" in a.last_error and "malformed" not in a.last_error


def test_an_unsupported_temperature_is_dropped_not_called_structured_output(serve, tmp_path):
    srv = serve({("memory_access", "plan"): [answer(PLAN)],
                 ("memory_access", "code"): [answer(code())]},
                rejects={"temperature": (lambda v: v != 1, OPENAI_TEMPERATURE)})
    a = agent(srv, tmp_path, temperature=0.1)
    (p,) = a.propose(vadd_context(run_dir=str(tmp_path)))
    assert p.change.kernel == FAST_VADD
    first, *rest = srv.exchanges
    assert first.status == 400 and first.request["temperature"] == 0.1
    # the same method (json_schema), without a temperature, for every later request
    assert all(e.status == 200 and "temperature" not in e.request for e in rest)
    assert {e.mode for e in srv.exchanges} == {"json_schema"}
    rec = json.loads(Path(a.last_prompt_files[0]).read_text())
    assert rec["attempts"][0]["kind"] == "temperature"
    facts = json.loads((tmp_path / "llm-endpoint.json").read_text())
    assert "refuses temperature=0.1: sent without one" in facts["learned"]


def test_a_cap_above_the_models_limit_is_named_as_that(serve, tmp_path):
    srv = serve(default=answer(PLAN),
                rejects={"max_completion_tokens": (lambda v: v > 16384, OPENAI_CAP_TOO_LARGE)})
    c = client(srv, tmp_path, max_tokens=200000)
    with pytest.raises(LLMUnavailable) as e:
        ask_plan(c)
    msg = str(e.value)
    assert "refuses an output cap of 200000 tokens (it allows at most 16384)" in msg
    assert "lower --max-tokens" in msg and "structured output" not in msg
    assert len(srv.exchanges) == 1  # no walk down the method chain


def test_another_400_is_reported_in_its_own_words(serve, tmp_path):
    odd = "Invalid value for 'user': expected a string of at most 64 characters."
    srv = serve(default=error(400, odd))
    c = client(srv, tmp_path)
    with pytest.raises(LLMUnavailable) as e:
        ask_plan(c)
    msg = str(e.value)
    assert odd[:60] in msg and "HTTP 400" in msg
    assert "refuses structured output" not in msg
    assert "with every structured-output method tried" in msg
    # each method was tried once, in order, without backoff
    assert [e.mode for e in srv.exchanges] == ["json_schema", "tools", "json_object", "plain"]


def test_a_method_refusal_is_still_one(serve, tmp_path):
    srv = serve(default=error(400, "response_format json_schema is not supported"))
    c = client(srv, tmp_path, methods="json_schema,function_calling")
    with pytest.raises(LLMUnavailable) as e:
        ask_plan(c)
    assert "refuses structured output (json_schema, function_calling)" in str(e.value)


@pytest.mark.filterwarnings("ignore::UserWarning")  # pydantic, on the odd content
def test_a_library_failure_on_a_valid_completion_is_not_blamed_on_the_server(serve, tmp_path):
    srv = serve(default=odd_content())
    with pytest.raises(LLMUnavailable) as e:
        ask_plan(client(srv, tmp_path))
    msg = str(e.value)
    assert "the LLM client libraries failed" in msg and "was a chat completion" in msg
    assert "not an OpenAI chat completion" not in msg and "\n" not in msg


@pytest.mark.parametrize("status, kind", [(401, "auth"), (404, "model"), (429, "transient"),
                                          (503, "transient"), (400, "bad-request")])
def test_errors_are_classified_by_cause(status, kind):
    import httpx
    import openai

    req = httpx.Request("POST", "http://x/v1/chat/completions")
    resp = httpx.Response(status, request=req, json={"error": {"message": "m"}})
    cls = {401: openai.AuthenticationError, 404: openai.NotFoundError,
           429: openai.RateLimitError, 503: openai.InternalServerError,
           400: openai.BadRequestError}[status]
    e = cls("m", response=resp, body={"error": {"message": "m"}})
    assert classify(e).kind == kind


def test_a_call_that_could_go_over_the_token_budget_is_not_made(serve, tmp_path):
    srv = serve(default=answer(PLAN))
    c = client(srv, tmp_path, max_tokens=100, token_budget=10_000)
    assert isinstance(ask_plan(c), PlanAnswer)
    used = srv.reported_usage()["total_tokens"]
    ledger = ledger_for(str(tmp_path))
    assert ledger is not None and ledger.tokens == used and ledger.reserved_tokens == 0
    # the next call's worst case (its counted prompt plus the cap of 100) would go over
    tight = client(srv, tmp_path, max_tokens=100, token_budget=used + 50)
    with pytest.raises(BudgetSpent) as e:
        ask_plan(tight)
    assert len(srv.exchanges) == 1  # nothing more was sent
    assert f"token budget of {used + 50} reached: {used} tokens used" in str(e.value)
    assert "it was not made" in str(e.value)


def test_a_call_that_could_go_over_the_cost_budget_is_not_made(serve, tmp_path):
    srv = serve(default=answer(PLAN))
    prices = {"price_input": 2.0, "price_output": 8.0, "max_tokens": 100}
    c = client(srv, tmp_path, **prices, cost_budget=1.0)
    assert isinstance(ask_plan(c), PlanAnswer)
    u = srv.reported_usage()
    spent = (u["input_tokens"] * 2.0 + u["output_tokens"] * 8.0) / 1e6
    # a second agent of the same run shares the ledger (a resumed run reads the records)
    forget_ledgers()
    other = LLMClient(LLMSettings.resolve(settings_for(srv, **prices, cost_budget=spent * 1.2)),
                      agent="loop", run_dir=str(tmp_path))
    with pytest.raises(BudgetSpent) as e:
        ask_plan(other)
    assert len(srv.exchanges) == 1
    assert f"${spent:.4f} spent" in str(e.value)
