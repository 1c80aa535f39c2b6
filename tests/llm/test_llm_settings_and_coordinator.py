"""Settings with environment fallbacks, the LLM coordinator, and LangSmith tracing."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from kernelcrew.agents.coordinator import score
from kernelcrew.agents.llm import LLMCoordinator, LLMSettings
from kernelcrew.agents.proposal import Change, Proposal
from kernelcrew.errors import InputError
from tests.conftest import ROOT
from tests.llm.conftest import API_KEY, settings_for
from tests.llm.scripted_server import answer
from tests.llm.scripts import FAST_VADD, PLAN, VADD_BASELINE, code

ENV_VARS = ("KERNELCREW_LLM_MODEL", "OPENAI_BASE_URL", "OPENAI_API_KEY",
            "KERNELCREW_LLM_STRUCTURED_OUTPUT", "KERNELCREW_LLM_TIMEOUT", "KERNELCREW_LLM_RETRIES")


@pytest.fixture
def clean_env(monkeypatch):
    for v in ENV_VARS:
        monkeypatch.delenv(v, raising=False)
    return monkeypatch


def test_settings_come_from_the_run_then_the_environment(clean_env):
    clean_env.setenv("KERNELCREW_LLM_MODEL", "qwen2.5-coder")
    clean_env.setenv("OPENAI_BASE_URL", "http://localhost:8000/v1")
    clean_env.setenv("KERNELCREW_LLM_STRUCTURED_OUTPUT", "function_calling")
    clean_env.setenv("KERNELCREW_LLM_RETRIES", "0")
    s = LLMSettings.resolve({})
    assert (s.model, s.base_url, s.structured_output, s.retries) == (
        "qwen2.5-coder", "http://localhost:8000/v1", "function_calling", 0)
    assert s.api_key == "not-needed"  # a local server takes any non-empty key
    s = LLMSettings.resolve({"model": "other", "base_url": "http://h:1/v1", "timeout": 9,
                             "structured_output": "json_mode"})
    assert (s.model, s.base_url, s.timeout, s.structured_output) == (
        "other", "http://h:1/v1", 9.0, "json_mode")


def test_the_api_key_is_never_shown(clean_env):
    clean_env.setenv("OPENAI_API_KEY", API_KEY)
    s = LLMSettings.resolve({"model": "gpt-x"})
    assert s.api_key == API_KEY and s.endpoint == "https://api.openai.com/v1"
    assert API_KEY not in repr(s) and API_KEY not in json.dumps(s.public())


@pytest.mark.parametrize("settings, says", [
    ({}, "KERNELCREW_LLM_MODEL"),
    ({"model": "gpt-x"}, "OPENAI_API_KEY"),
    ({"model": "m", "base_url": "http://h/v1", "structured_output": "xml"}, "json_schema"),
    ({"model": "m", "base_url": "localhost:8000/v1"}, "http://"),
])
def test_bad_settings_are_one_line_input_errors(clean_env, settings, says):
    with pytest.raises(InputError) as e:
        LLMSettings.resolve(settings)
    assert says in str(e.value) and "\n" not in str(e.value)


def prop(author: str, kind: str, kernel: str, *, type_: str = "source", flags=None,
         gain: float = 1.5) -> Proposal:
    return Proposal(author=author, bottleneck="Scalar loop.", plan=f"{kind} plan",
                    change=Change(type=type_, kind=kind, kernel=kernel, flags=flags),
                    expected_gain=gain, risks="none", confidence=0.7)


FLAGS_ONLY = VADD_BASELINE.replace("[-O2]", "[-O3, -march=native]")
PROPOSALS = [prop("memory_access", "restrict", FAST_VADD, gain=2.0),
             prop("compiler_flags", "flags", FLAGS_ONLY, type_="flags",
                  flags=["-O3", "-march=native"], gain=1.3)]


def test_the_llm_coordinator_chooses_and_says_why(serve, tmp_path):
    srv = serve({("coordinator", "coordinate"): [answer({
        "candidates": [[2]], "rejected": ["1: restrict repeats a change tried before"],
        "reason": "Flags first: cheapest and the profile shows a scalar loop."})]})
    coord = LLMCoordinator(settings_for(srv), run_dir=str(tmp_path))
    d = coord.coordinate(PROPOSALS, VADD_BASELINE, max_candidates=2,
                         profile_summary="BW 4.1 of 19.5 GB/s", tried=["fusion by loop: slower"])
    assert [c.author for c in d.candidates] == ["compiler_flags"]
    assert d.reason.startswith("Flags first") and d.rejected == [
        "1: restrict repeats a change tried before"]
    (call,) = srv.exchanges
    assert "You are the kernelcrew coordinator" in call.system and "at most 2" in call.system
    assert "1. memory_access/restrict (type source; free-form rewrite)" in call.user
    assert "2. compiler_flags/flags" in call.user and "flags -O3 -march=native" in call.user
    assert f"ranking score {score(PROPOSALS[0], {}):.3f}" in call.user
    assert "measured record: no track record" in call.user
    # the author's estimate is shown after the evidence, and marked as its own
    assert "rules' estimate 2.00x at confidence 0.70" in call.user
    assert "Rank by what was measured and by evidence" in call.system
    assert "fusion by loop: slower" in call.user and "BW 4.1 of 19.5 GB/s" in call.user
    assert coord.last_usage == {**srv.reported_usage(), "calls": 1}
    assert coord.last_prompt_file and (tmp_path / "llm").is_dir()


def test_the_llm_coordinator_merges_compatible_proposals(serve, tmp_path):
    srv = serve({("coordinator", "coordinate"): [answer({
        "candidates": [[1, 2]], "rejected": [], "reason": "Compatible: merge them."})]})

    def apply(p: Proposal, text: str) -> str | None:  # replay a flags change on a text
        return text.replace("[-O3, -march=native]", "[-O3, -march=native, -funroll-loops]")

    d = LLMCoordinator(settings_for(srv), run_dir=str(tmp_path)).coordinate(
        PROPOSALS, VADD_BASELINE, apply=apply)
    (c,) = d.candidates
    assert c.author == "memory_access+compiler_flags" and "-funroll-loops" in c.change.kernel
    assert d.merged_from == [["memory_access", "compiler_flags"]]


def test_an_unusable_coordinator_answer_falls_back_to_the_heuristic_choice(serve, tmp_path):
    bad = answer({"candidates": [[7]], "reason": "?"})
    srv = serve({("coordinator", "coordinate"): [bad, bad]})
    d = LLMCoordinator(settings_for(srv), run_dir=str(tmp_path)).coordinate(
        PROPOSALS, VADD_BASELINE)
    assert d.reason.startswith("(LLM answer unusable: coordinate: unusable answer after one "
                               "repair: proposal numbers run from 1 to 2")
    assert d.candidates  # the heuristic coordinator still chose
    assert len(srv.exchanges) == 2


def test_langsmith_traces_the_calls_when_its_variables_are_set(serve):
    """Tracing is langchain's own: set LANGSMITH_TRACING/LANGSMITH_API_KEY and the runs go
    to LANGSMITH_ENDPOINT (here the scripted server), named per agent and step, without the
    API key. Unset (every other test), nothing is sent anywhere."""
    srv = serve({("memory_access", "plan"): [answer(PLAN)],
                 ("memory_access", "code"): [answer(code())]})
    script = (
        "from kernelcrew.agents.llm import make_specialist\n"
        "from tests.llm.scripts import vadd_context\n"
        f"a = make_specialist('memory_access', settings={settings_for(srv)!r})\n"
        "print(len(a.propose(vadd_context())))\n")
    env = {"LANGSMITH_TRACING": "true", "LANGSMITH_API_KEY": "ls-test-key",
           "LANGSMITH_ENDPOINT": f"http://127.0.0.1:{srv.port}", "PATH": "/usr/bin:/bin"}
    p = subprocess.run([sys.executable, "-c", script], cwd=ROOT, env=env, capture_output=True,
                       check=False,
                       text=True, timeout=120)
    assert p.returncode == 0 and p.stdout.strip() == "1", p.stderr[-2000:]
    runs = b"".join(body for path, body in srv.other_posts if path.startswith("/runs"))
    assert b"kernelcrew.memory_access.plan" in runs and b"kernelcrew.memory_access.code" in runs
    assert API_KEY.encode() not in runs
