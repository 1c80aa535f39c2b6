"""LLM specialists against a scripted OpenAI-compatible server, through the real ChatOpenAI.

Each test scripts what the "model" answers; everything else (langchain-openai, the openai
SDK, HTTP, parsing, retries, the prompt files) is the real thing.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from kernelcrew.agents.context import Feedback
from kernelcrew.agents.llm import LLMSpecialist, LLMUnavailable, make_specialist, preflight
from kernelcrew.agents.proposal import Change, Proposal
from tests.llm.conftest import API_KEY, settings_for
from tests.llm.scripted_server import (
    DEEPSEEK_REFUSAL,
    answer,
    delayed,
    error,
    garbage,
    hang,
    raw,
)
from tests.llm.scripts import BROKEN_VADD, FAST_VADD, PLAN, REPLAN, code, vadd_context

RULES = [
    "Changing the operator's input/output semantics",
    "Adding kernels the launch plan does not declare",
    ("Approximate math that changes results beyond the operator's tolerance (rtol=1e-05, "
     "atol=1e-06)"),
    "the bottleneck in at most three sentences",
    "a plan",
    "the complete kernel file, front matter included",
    "the expected gain",
    "the risks",
]


def agent(name: str, srv, tmp_path: Path, **over) -> LLMSpecialist:
    return make_specialist(name, settings=settings_for(srv, **over), run_dir=str(tmp_path))


def failed_proposal(kernel: str = BROKEN_VADD) -> Proposal:
    return Proposal(author="memory_access", bottleneck=PLAN["bottleneck"], plan=PLAN["plan"],
                    change=Change(type="source", kind="restrict", kernel=kernel),
                    expected_gain=2.0, risks="none", confidence=0.8)


def assert_no_key_on_disk(folder: Path) -> None:
    for f in folder.rglob("*"):
        if f.is_file():
            assert API_KEY not in f.read_text(errors="replace"), f"API key written to {f}"


def test_plan_is_produced_and_recorded_before_the_code(serve, tmp_path):
    srv = serve({("memory_access", "plan"): [answer(PLAN)],
                 ("memory_access", "code"): [answer(code())]})
    a = agent("memory_access", srv, tmp_path)
    props = a.propose(vadd_context(run_dir=str(tmp_path)))

    assert [(e.agent, e.step) for e in srv.exchanges] == [("memory_access", "plan"),
                                                         ("memory_access", "code")]
    assert "Do not write the kernel yet" in srv.exchanges[0].user
    # the second call carries the recorded plan
    assert PLAN["plan"] in srv.exchanges[1].user
    (p,) = props
    assert p.author == "memory_access" and p.change.kernel == FAST_VADD
    assert p.plan == PLAN["plan"] and p.bottleneck.startswith("The loop is scalar")
    assert p.change.kind == "restrict" and p.change.type == "source"
    assert p.change.flags == ["-O3", "-march=native"]
    assert p.expected_gain == 2.0 and p.risks == "bandwidth-bound"
    # the plan is on record, in its own file, before the code call
    files = sorted((tmp_path / "llm").glob("*.json"))
    assert [f.name for f in files] == ["02-memory_access-0.json", "02-memory_access-1.json"]
    first = json.loads(files[0].read_text())
    assert first["step"] == "plan" and first["parsed"]["plan"] == PLAN["plan"]
    assert a.last_plan["file"] == str(files[0])
    assert a.last_prompt_file == str(files[1]) and a.last_prompt_files == [str(f) for f in files]
    # usage: the sum of what the server reported, per call and in total
    assert a.last_usage == {**srv.reported_usage(), "calls": 2}
    rec = json.loads(files[1].read_text())
    assert rec["usage"]["input_tokens"] == srv.exchanges[1].usage["prompt_tokens"]
    assert rec["messages"][0]["role"] == "system" and rec["messages"][1]["role"] == "human"
    assert rec["response"] and rec["method"] == "json_schema"
    assert_no_key_on_disk(tmp_path)


@pytest.mark.parametrize("name", ["memory_access", "loop", "compiler_flags"])
def test_prompts_carry_the_rules_and_a_context_focused_on_the_field(serve, tmp_path, name):
    srv = serve({(name, "plan"): [answer(PLAN)], (name, "code"): [answer(code())]})
    agent(name, srv, tmp_path).propose(vadd_context(run_dir=str(tmp_path)))
    plan_call = srv.calls(name, "plan")[0]
    for rule in RULES:
        assert rule in plan_call.system, rule
    user = plan_call.user
    # what every specialist gets
    for common in ("extern \"C\" void vadd", "BW 4.1 of 19.5 GB/s", "Recent iterations",
                   "iteration 1: loop/unroll: same", "restrict let g++ vectorize the add",
                   "fusion by memory_access: rejected", "x (input), z (input), y (output)"):
        assert common in user, common
    focus = {
        "memory_access": (["## Memory metrics", "achieved_bandwidth", "hot_loop_stride",
                           "l1_ld_sectors_per_request"], ["ipc:", "threads_busy"]),
        "loop": (["## Occupancy, stall and instruction metrics", "threads_busy", "ipc:",
                  "achieved_occupancy_pct"], ["hot_loop_stride", "l1_ld_sectors"]),
        "compiler_flags": (["## Vectorization / ptxas report", "hot_loop_vector_bytes",
                            "not vectorized (possible aliasing)", "Allowed flags (cpu)",
                            "-march=native", "Current flags: [-O2]"],
                           ["hot_loop_stride", "l2_hit_rate", "achieved_bandwidth"]),
    }[name]
    for want in focus[0]:
        assert want in user, want
    for other in focus[1]:
        assert other not in user, other


CUT = json.dumps(code())[:120]  # an answer cut off in the middle of the kernel


@pytest.mark.parametrize("bad, says", [
    (raw("Sure! Here is the kernel you asked for."), "the answer is not valid JSON"),
    (raw(CUT, finish_reason="length"), "cut off at the output token limit"),
])
def test_malformed_output_is_retried_once_with_the_parse_error(serve, tmp_path, bad, says):
    srv = serve({("memory_access", "plan"): [answer(PLAN)],
                 ("memory_access", "code"): [bad, answer(code())]})
    a = agent("memory_access", srv, tmp_path)
    (p,) = a.propose(vadd_context(run_dir=str(tmp_path)))
    assert p.change.kernel == FAST_VADD
    repair = srv.calls("memory_access", "code")[1].user
    assert "Your previous answer could not be used: " in repair and says in repair
    assert bad.data[:30] in repair  # the bad answer is quoted back
    rec = json.loads(Path(a.last_prompt_files[1]).read_text())
    assert rec["error"] and says in rec["error"]
    # the bad answer's tokens count too: the server reported them
    assert a.last_usage == {**srv.reported_usage(), "calls": 3}


def test_json_wrapped_in_think_tags_and_fences_is_read_without_a_repair(serve, tmp_path):
    wrapped = f"<think>The loop is scalar.</think>\nHere it is:\n```json\n{json.dumps(PLAN)}\n```"
    srv = serve({("memory_access", "plan"): [raw(wrapped)],
                 ("memory_access", "code"): [answer(code())]}, refuse={"json_schema", "tools"})
    (p,) = agent("memory_access", srv, tmp_path).propose(vadd_context(run_dir=str(tmp_path)))
    assert p.plan == PLAN["plan"]
    assert [e.status for e in srv.exchanges] == [400, 400, 200, 200]  # no repair call


def test_a_kernel_without_front_matter_gets_the_front_matter_the_crew_knows(serve, tmp_path):
    source = FAST_VADD.split("*/\n", 1)[1]
    srv = serve({("memory_access", "plan"): [answer(PLAN)],
                 ("memory_access", "code"): [answer(code(source))]})
    a = agent("memory_access", srv, tmp_path)
    (p,) = a.propose(vadd_context(run_dir=str(tmp_path)))
    # the entry and the flags of the current best (the baseline: -O2), then the source
    assert p.change.kernel.startswith("/* kernelcrew\nentry: vadd\nflags:\n- -O2\n*/\n") \
        or p.change.kernel.startswith("/* kernelcrew\nentry: vadd\nflags: [-O2]\n*/\n")
    assert p.change.kernel.endswith(source)
    assert len(srv.exchanges) == 2  # no repair was needed


def test_an_unusable_code_answer_is_sent_back_once_then_given_up(serve, tmp_path):
    srv = serve({("memory_access", "plan"): [answer(PLAN)],
                 ("memory_access", "code"): [answer({"moves": [{"move": "tiling_magic"}]}),
                                             answer({"kernel": 3})]})
    a = agent("memory_access", srv, tmp_path)
    assert a.propose(vadd_context(run_dir=str(tmp_path))) == []  # nothing usable: no crash
    repair = srv.calls("memory_access", "code")[1].user
    assert "there is no move named 'tiling_magic'" in repair
    assert "unusable answer after one repair" in a.last_error
    assert "does not match the schema" in a.last_error
    assert len(srv.exchanges) == 3  # exactly one repair
    assert [x["kind"] for x in a.last_answers] == ["usable", "move_refused", "schema"]


def test_timeout_429_and_500_are_retried_with_backoff_then_succeed(serve, tmp_path):
    srv = serve({("memory_access", "plan"): [delayed(PLAN, 2.0), error(500, "upstream died"),
                                             answer(PLAN)],
                 ("memory_access", "code"): [error(429, "slow down", retry_after=0),
                                             answer(code())]})
    a = agent("memory_access", srv, tmp_path, timeout=0.5, retries=3)
    (p,) = a.propose(vadd_context(run_dir=str(tmp_path)))
    assert p.change.kernel == FAST_VADD
    plan_rec = json.loads(Path(a.last_plan["file"]).read_text())
    assert [x["error"] for x in plan_rec["attempts"]] == [
        "request timed out", "HTTP 500: upstream died", None]
    code_rec = json.loads(Path(a.last_prompt_file).read_text())
    assert code_rec["attempts"][0]["error"] == "HTTP 429: slow down"
    # only answered calls count, exactly as reported
    assert a.last_usage == {**srv.reported_usage(), "calls": 2}


def test_an_endpoint_that_never_answers_raises_llm_unavailable(serve, tmp_path):
    srv = serve(default=hang())
    a = agent("loop", srv, tmp_path, timeout=0.5, retries=1)
    t0 = time.monotonic()
    with pytest.raises(LLMUnavailable) as e:
        a.propose(vadd_context(run_dir=str(tmp_path)))
    assert time.monotonic() - t0 < 10
    msg = str(e.value)
    assert "\n" not in msg and srv.base_url in msg
    assert "failed after 2 attempts: request timed out" in msg
    # what was sent is on record even though nothing came back
    rec = json.loads(Path(a.last_prompt_file).read_text())
    assert rec["error"] == msg and rec["messages"] and rec["response"] is None
    assert a.last_usage["total_tokens"] == 0


def test_a_response_that_is_no_chat_completion_stops_cleanly(serve, tmp_path):
    srv = serve(default=garbage())
    with pytest.raises(LLMUnavailable) as e:
        agent("loop", srv, tmp_path).propose(vadd_context(run_dir=str(tmp_path)))
    assert "not an OpenAI chat completion" in str(e.value) and "\n" not in str(e.value)


def test_an_unreachable_endpoint_fails_the_preflight_in_one_line(closed_port):
    with pytest.raises(LLMUnavailable) as e:
        preflight({"model": "m", "base_url": f"http://127.0.0.1:{closed_port}/v1",
                   "api_key": "x"}, timeout=2)
    assert "is unreachable" in str(e.value) and "\n" not in str(e.value)


@pytest.mark.parametrize("status", [400, 422])
def test_deepseek_style_json_schema_refusal_falls_back_to_function_calling(serve, tmp_path,
                                                                          status):
    srv = serve({("memory_access", "plan"): [answer(PLAN)],
                 ("memory_access", "code"): [answer(code())]}, refuse={"json_schema"},
                refuse_status=status)
    a = agent("memory_access", srv, tmp_path)
    (p,) = a.propose(vadd_context(run_dir=str(tmp_path)))
    assert p.change.kernel == FAST_VADD
    # first call: refused json_schema, then tools; the second call starts with tools
    assert [(e.mode, e.status) for e in srv.exchanges] == [
        ("json_schema", status), ("tools", 200), ("tools", 200)]
    rec = json.loads(Path(a.last_plan["file"]).read_text())
    assert DEEPSEEK_REFUSAL in rec["attempts"][0]["error"]
    assert rec["method"] == "function_calling"


def test_a_server_refusing_schema_and_tools_gets_json_mode_with_the_schema_in_the_prompt(
        serve, tmp_path):
    srv = serve({("loop", "plan"): [answer(PLAN)], ("loop", "code"): [answer(code())]},
                refuse={"json_schema", "tools"})
    (p,) = agent("loop", srv, tmp_path).propose(vadd_context(run_dir=str(tmp_path)))
    assert p.change.kernel == FAST_VADD
    modes = [(e.mode, e.status) for e in srv.exchanges]
    assert modes == [("json_schema", 400), ("tools", 400), ("json_object", 200),
                     ("json_object", 200)]
    assert '"expected_gain"' in srv.exchanges[2].system  # the JSON schema is in the prompt


def test_a_configured_method_is_used_first(serve, tmp_path):
    srv = serve({("loop", "plan"): [answer(PLAN)], ("loop", "code"): [answer(code())]})
    agent("loop", srv, tmp_path, structured_output="function_calling").propose(
        vadd_context(run_dir=str(tmp_path)))
    assert [e.mode for e in srv.exchanges] == ["tools", "tools"]


def test_compile_errors_go_back_to_the_author_who_fixes_the_kernel(serve, tmp_path):
    srv = serve({("memory_access", "code"): [answer(code())]})
    a = agent("memory_access", srv, tmp_path)
    errors = ("compile failed\nline 8: error: expected ';' before '}' token\n"
              "--- last lines of the compiler output ---\nkernel.cpp:8:52: error: expected ';'")
    ctx = vadd_context(run_dir=str(tmp_path),
                       feedback=Feedback(kind="compile-error", message=errors, attempt=1))
    new = a.revise(ctx, failed_proposal())
    assert new is not None and new.change.kernel == FAST_VADD
    assert new.plan == PLAN["plan"]  # same plan, code fixed
    (call,) = srv.exchanges  # no new plan: straight to the code
    assert call.step == "code"
    assert "Compile errors of your last candidate (attempt 1 of 3)" in call.user
    assert "expected ';' before '}' token" in call.user
    assert "Your failed candidate" in call.user and BROKEN_VADD.strip() in call.user
    assert a.last_usage == {**srv.reported_usage(), "calls": 1}


@pytest.mark.parametrize("how", ["attempt", "crew-message"])
def test_after_three_compile_failures_the_plan_is_revised_first(serve, tmp_path, how):
    srv = serve({("memory_access", "plan"): [answer(REPLAN)],
                 ("memory_access", "code"): [answer(code())]})
    a = agent("memory_access", srv, tmp_path)
    if how == "attempt":
        fb = Feedback(kind="compile-error", message="line 8: error: expected ';'", attempt=3)
    else:  # what the graph's revise node writes after 3 failures across the crew
        fb = Feedback(kind="compile-error", attempt=1, message=(
            "Three compile failures in a row: revise your PLAN first, then write the code.\n"
            "line 8: error: expected ';'"))
    new = a.revise(vadd_context(run_dir=str(tmp_path), feedback=fb), failed_proposal())
    assert [e.step for e in srv.exchanges] == ["plan", "code"]
    assert "Revise your PLAN first" in srv.exchanges[0].user
    assert PLAN["plan"] in srv.exchanges[0].user  # the previous plan, to be revised
    assert REPLAN["plan"] in srv.exchanges[1].user  # the code follows the new plan
    assert new is not None and new.plan == REPLAN["plan"] and new.change.kind == "restrict_simple"


def test_plan_first_mode_plans_then_codes_and_counts_both_calls(serve, tmp_path):
    srv = serve({("compiler_flags", "plan"): [answer(PLAN)],
                 ("compiler_flags", "code"): [answer(code())]})
    a = agent("compiler_flags", srv, tmp_path)
    ctx = vadd_context(run_dir=str(tmp_path))
    note = a.plan(ctx)
    assert "restrict" in note and "three times in a row" in srv.exchanges[0].user
    (p,) = a.propose(ctx)
    assert [e.step for e in srv.exchanges] == ["plan", "code"]  # no second plan call
    assert a.last_usage == {**srv.reported_usage(), "calls": 2}
    assert p.change.kernel == FAST_VADD


def test_prices_give_the_cost_of_the_calls(serve, tmp_path):
    srv = serve({("loop", "plan"): [answer(PLAN)], ("loop", "code"): [answer(code())]})
    a = agent("loop", srv, tmp_path, price_input=2.0, price_output=8.0)
    a.propose(vadd_context(run_dir=str(tmp_path)))
    u = srv.reported_usage()
    assert a.last_usage["cost_microusd"] == round(u["input_tokens"] * 2.0
                                                  + u["output_tokens"] * 8.0)


def test_a_kernel_that_renames_the_entry_is_sent_back(serve, tmp_path):
    renamed = FAST_VADD.replace("entry: vadd", "entry: vadd2").replace("void vadd(",
                                                                        "void vadd2(")
    srv = serve({("loop", "plan"): [answer(PLAN)],
                 ("loop", "code"): [answer(code(renamed)), answer(code())]})
    (p,) = agent("loop", srv, tmp_path).propose(vadd_context(run_dir=str(tmp_path)))
    assert "the entry must stay `vadd`" in srv.calls("loop", "code")[1].user
    assert p.change.kernel == FAST_VADD


def test_a_fenced_kernel_is_unwrapped(serve, tmp_path):
    srv = serve({("loop", "plan"): [answer(PLAN)],
                 ("loop", "code"): [answer(code(f"```cpp\n{FAST_VADD}```"))]})
    (p,) = agent("loop", srv, tmp_path).propose(vadd_context(run_dir=str(tmp_path)))
    assert p.change.kernel == FAST_VADD
    assert len(srv.exchanges) == 2
