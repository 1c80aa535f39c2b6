"""Every prompt the crew can send, grepped: none holds the judge's detection texts, the
gate's band or threshold, or the benchmark's case sizes.

Two real runs with the scripted server, between them every role and every step that
builds a prompt: the writer (plan, code, fix) on an operator with a reference only, then
the crew with LLM specialists (plan, code, a compile error's fix, a wrong result's
explanation and fix), the LLM coordinator, critic and reflector, memory on, over two
iterations. One candidate caches its result between calls, the kind of kernel the
judge's in-place probe catches: its author is told what was wrong, never how it was
found. Then every message of every record under `<run>/llm/` is searched.

The rule for case sizes: small numbers (1, 29) appear in any prompt (line numbers,
indices, `n = 1` in the rules), so they are searched only as case labels (`n=29`);
the distinctive sizes of op.yaml (1048573 and up, 77777) are searched as whole numbers,
with or without thousands separators, and as labels. The operator's sizes are chosen so
that neither the kernels nor the prompt files hold them for another reason.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from tests.llm.scripted_server import answer
from tests.llm.scripts import PLAN, code
from tests.llm.test_llm_loop import BASELINE, EXPMUL, WRITER_PLAN, crew, result
from tests.llm.test_llm_writer import ENV as WRITER_ENV

# what the judge says when it catches something, and how the gate decides (band,
# threshold): none of it may reach an author
JUDGE_PHRASES = [
    "changed in place", "replayed or cached", "tampered", "probe", "parent's clock",
    "timings disagree", "roofline", "quarantine", "noise band", "band of", "threshold",
    "minimum speedup", "measured noise", "poison", "input set", "timed run", "first call",
    "checksum", "the worker report", "lacks the", "modified its input",
]

CACHING = BASELINE.replace(
    '#include <cstdint>\nextern "C" void expmul(const float* x, const float* g, float* y, '
    'int64_t n) {\n  for (int64_t i = 0; i < n; ++i) y[i] = std::exp(x[i]) * g[i];\n}',
    '#include <cstdint>\n'
    'static float kc_cache[1 << 22];\n'
    'static const float* kc_last = nullptr;\n'
    'static int64_t kc_n = -1;\n'
    'extern "C" void expmul(const float* x, const float* g, float* y, int64_t n) {\n'
    '  if (x == kc_last && n == kc_n) {  // the same input again: the same answer\n'
    '    for (int64_t i = 0; i < n; ++i) y[i] = kc_cache[i];\n'
    '    return;\n'
    '  }\n'
    '  for (int64_t i = 0; i < n; ++i) y[i] = std::exp(x[i]) * g[i];\n'
    '  if (n <= (1 << 22)) {\n'
    '    for (int64_t i = 0; i < n; ++i) kc_cache[i] = y[i];\n'
    '    kc_last = x;\n'
    '    kc_n = n;\n'
    '  }\n}')
assert CACHING != BASELINE
BROKEN = BASELINE.replace("* g[i];", "* g[i]")
# writes into its input: the judge's input checks catch it every time
WRITES_INPUT = BASELINE.replace("y[i] = std::exp(x[i]) * g[i];",
                                "{ y[i] = std::exp(x[i]) * g[i]; const_cast<float*>(x)[i] = 0; }")
OFF_BY_ONE = BASELINE.replace("std::exp(x[i]) * g[i];",
                              "std::exp(x[i]) * g[i] + (i == n - 1 ? 1.0f : 0.0f);")


def case_patterns(op_yaml: Path) -> list[re.Pattern]:
    """Labels of every case, and the distinctive sizes as whole numbers."""
    import yaml

    spec = yaml.safe_load(op_yaml.read_text())
    pats = []
    for g in spec["shapes"].values():
        for c in g["cases"]:
            label = ",".join(f"{k}={v}" for k, v in c.items())
            pats.append(re.compile(rf"(?<![\w.]){re.escape(label)}(?![\w.])"))
            for v in c.values():
                if v >= 1000:
                    for form in (str(v), f"{v:,}"):
                        # a whole number: not a part of a longer one ("12,097,1430")
                        pats.append(re.compile(rf"(?<![\w.])(?<!\d,){re.escape(form)}"
                                               rf"(?!\w)(?![.,]\d)"))
    return pats


def prompts(run_dir: Path) -> list[tuple[str, str]]:
    """(record file, message text) of every message the crew sent."""
    out = []
    for f in sorted((run_dir / "llm").glob("*.json")):
        rec = json.loads(f.read_text())
        for m in rec.get("messages") or []:
            out.append((f.name, m["content"]))
    return out


def grep(run_dir: Path, op_yaml: Path) -> list[str]:
    found = []
    pats = case_patterns(op_yaml)
    for name, text in prompts(run_dir):
        low = text.lower()
        found += [f"{name}: judge phrase {p!r}" for p in JUDGE_PHRASES if p in low]
        found += [f"{name}: case size {p.pattern!r}" for p in pats if p.search(text)]
    return found


def llm(ex):
    """The scripted model for every role of the crew."""
    user = ex.user
    if ex.step == "plan":
        return answer({**PLAN, "kind": f"{ex.agent}_change"})
    if ex.step == "explain":
        return answer({"cause": "it returns a stored answer when the input pointer repeats",
                       "fix": "compute every call"})
    if ex.step == "coordinate":
        n = len(re.findall(r"^\d+\. ", user, re.MULTILINE))
        return answer({"candidates": [[i] for i in range(1, n + 1)][:3], "rejected": [],
                       "reason": "each on its own"})
    if ex.step in ("critique", "reflect"):
        vs = re.search(r"([\d.]+)x vs the best", user)
        said = f"At {vs.group(1)}x vs the best" if vs else "It was rejected"
        key = "why"
        data = {key: f"{said}: the change moved the hot loop."}
        if ex.step == "reflect":
            data["lesson"] = "Measure first."
        return answer(data)
    if ex.step == "code":
        if ex.agent == "memory_access":  # writes its input, then a flags change, then caches
            if "Your candidate gave wrong results" in user:
                return answer(code(BASELINE.replace("[-O3", "[-O2"), 1.1))
            if "iteration 1:" in user:  # the history: this is iteration 2
                return answer(code(CACHING, 1.5))
            return answer(code(WRITES_INPUT, 1.5))
        if ex.agent == "loop":
            if "did not compile" in user:
                return answer({"moves": [{"move": "vector_math"}]})
            return answer(code(BROKEN, 2.0))
        if "Your candidate gave wrong results" in user or ex.agent != "compiler_flags":
            return answer({"moves": [{"move": "unroll", "params": {"factor": 8}}]})
        return answer(code(OFF_BY_ONE, 1.2))
    return answer({"why": "-", "lesson": "-"})


@pytest.mark.slow  # the writer's run and a two-iteration crew run: about 2 minutes
def test_no_prompt_holds_judge_internals_or_case_sizes(serve, tmp_path):
    srv = serve(default=llm)
    res = result(crew(srv.base_url, EXPMUL, "--agents",
                      "specialists=llm,coordinator=llm,critic=llm,reflector=llm",
                      "--max-iters", "2", "--patience", "3", "--memory-dir",
                      str(tmp_path / "memory"), timeout=900))
    run = Path(res["run_dir"])
    steps = {(e.agent, e.step) for e in srv.exchanges}
    for want in [("memory_access", "plan"), ("memory_access", "code"),
                 ("memory_access", "explain"), ("compiler_flags", "explain"), ("loop", "code"), ("compiler_flags", "code"),
                 ("coordinator", "coordinate"), ("critic", "critique"),
                 ("reflector", "reflect")]:
        assert want in steps, want
    # a wrong result went back to its author with what was wrong
    explain = srv.calls("compiler_flags", "explain")[0].user
    assert "Your last candidate was incorrect" in explain and "the reference says" in explain
    # the kernel that writes its input was caught (inputs are read-only memory: the write
    # faults): its author is told what kind of failure it was, not how the judge found it
    events = [json.loads(ln) for ln in (run / "trace.jsonl").read_text().splitlines()]
    caught = [e for e in events if e["node"] == "verify" and e.get("correct") is False
              and e["agent"] == "memory_access"]
    assert caught, "the kernel that writes its input was not rejected"
    told = srv.calls("memory_access", "explain")[0].user
    kinds = re.findall(r"^- \w+ case \d+[^:\n]*: (the kernel crashed|input \w+ was written to|"
                       r"rejected by the judge's (?:integrity )?checks)", told, re.MULTILINE)
    assert len(kinds) == 1, told  # the case it failed in; the cases after it were not run
    assert "modified" not in told and "fault" not in told and "read-only memory" not in told
    # iteration 2: memory_access sends a kernel that replays a cached result; whether the
    # judge catches it in the race or not, nothing of how it checks reaches a prompt
    # ... the compile error reached loop, in the compiler's words
    fix = [c.user for c in srv.calls("loop", "code") if "did not compile" in c.user]
    assert fix and "error:" in fix[0]

    # the writer's prompts: an operator with a reference and no baseline
    op = tmp_path / "expmul_ref"
    op.mkdir()
    shutil.copy(EXPMUL / "reference.py", op / "reference.py")
    (op / "op.yaml").write_text((EXPMUL / "op.yaml").read_text().replace(
        "baselines: {cpu: baseline.cpp}\n", ""))
    wsrv = serve({("writer", "plan"): [answer(WRITER_PLAN)],
                  ("writer", "code"): [answer(code(BROKEN, 1.0))],
                  ("writer", "fix"): [answer(code(OFF_BY_ONE, 1.0)), answer(code(BASELINE, 1.0))],
                  ("memory_access", "plan"): [answer(PLAN)],
                  ("memory_access", "code"): [answer({"moves": [{"move": "vector_math"}]})]})
    wres = result(crew(wsrv.base_url, op, "--agents", "llm", "--specialists", "memory_access",
                       "--max-iters", "1", "--no-memory", env=WRITER_ENV))
    assert [e.step for e in wsrv.calls("writer")][:2] == ["plan", "code"]
    assert "shape group typical" in wsrv.calls("writer")[0].user  # the contract instead
    wrong = wsrv.calls("writer", "fix")[1].user
    assert "Wrong results" in wrong and "the reference says" in wrong

    # the grep itself, over every message of every record of both runs
    sent = prompts(run) + prompts(Path(wres["run_dir"]))
    assert len(sent) >= 20
    found = grep(run, EXPMUL / "op.yaml") + grep(Path(wres["run_dir"]), op / "op.yaml")
    assert found == []
    # the grep finds what it looks for: a record holding a judge's words and a case label
    fake = tmp_path / "fake"
    (fake / "llm").mkdir(parents=True)
    (fake / "llm" / "01-x-0.json").write_text(json.dumps({"messages": [{"role": "human",
        "content": "timed run with a few input elements changed in place, case n=77777, "
                   "typical n = 2,097,143"}]}))
    assert len(grep(fake, EXPMUL / "op.yaml")) == 5
