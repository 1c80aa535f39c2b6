"""An operator with a reference and no baseline (`--agents llm`): the writer's first
kernel (after a compile error it repairs) becomes the baseline, then the crew optimizes
it; the result also compares the best kernel with the reference timed on the same
machine. With the heuristic crew the missing baseline is one line. The real CLI, graph,
compiler and harness run; only the LLM is scripted."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.conftest import kernelcrew
from tests.llm.conftest import API_KEY
from tests.llm.scripted_server import answer
from tests.llm.scripts import BROKEN_VADD, FAST_VADD, PLAN, code

OP = str(Path(__file__).resolve().parent / "ops" / "vadd_reference_only")
ENV = {"OPENAI_API_KEY": API_KEY, "KERNELCREW_LLM_MODEL": "scripted",
       "KERNELCREW_LLM_BACKOFF": "0.01"}

FIRST_PLAN = {**PLAN, "bottleneck": "An elementwise add: memory-bound, 12 bytes per element.",
              "plan": "1. One loop over n writing y[i] = x[i] + z[i].", "kind": "first_kernel",
              "expected_gain": 1.0}
# the writer's first kernel is correct and slow (the add eight times through a volatile, as
# tests/llm/ops/vadd_slow), so the crew's kernel wins beyond the noise of a loaded machine
FIRST = (Path(__file__).resolve().parent / "ops" / "vadd_slow" / "baseline.cpp").read_text()
WRONG_SIZE = FIRST.replace("i < n", "i + 1 < n")  # misses the last element
assert WRONG_SIZE != FIRST


@pytest.mark.slow
def test_a_reference_only_op_gets_its_baseline_from_the_writer_then_the_crew(serve):
    srv = serve({("writer", "plan"): [answer(FIRST_PLAN)],
                 ("writer", "code"): [answer(code(BROKEN_VADD, 1.0))],
                 ("writer", "fix"): [answer(code(WRONG_SIZE, 1.0)), answer(code(FIRST, 1.0))],
                 ("memory_access", "plan"): [answer(PLAN)],
                 ("memory_access", "code"): [answer(code())]})
    os.environ.pop("OPENAI_BASE_URL", None)
    p = kernelcrew("optimize", OP, "--agents", "llm", "--base-url", srv.base_url,
                   "--max-iters", "1", "--reps", "4", "--no-memory", "--json",
                   "--specialists", "memory_access", "--structured-output",
                   "function_calling", env=ENV, timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    res = json.loads(p.stdout)
    run = Path(res["run_dir"])

    # the writer: plan, broken code, a fix that is wrong on a size, the fix that is right
    assert [(e.agent, e.step) for e in srv.exchanges][:4] == [
        ("writer", "plan"), ("writer", "code"), ("writer", "fix"), ("writer", "fix")]
    first_fix, second_fix = srv.calls("writer", "fix")
    assert "did not pass (attempt 1 of 4)" in first_fix.user
    assert "line 8: error: expected" in first_fix.user  # g++'s own words reached it
    assert "Wrong results" in second_fix.user and "attempt 2 of 4" in second_fix.user
    # it saw the spec and the reference, and the entry it must write
    assert "np.add(x, z)" in srv.exchanges[0].user
    assert "vadd(const float* x, const float* z, float* y, int64_t n)" in \
        srv.calls("writer", "code")[0].user

    # the first correct kernel is the run's baseline, the crew's kernel the best
    assert (run / "baseline.cpp").read_text() == FIRST
    assert res["baseline_written_by"] == "writer"
    assert res["best"]["correct"] is True and res["best"]["author"] == "memory_access"
    assert Path(res["best"]["path"]).read_text() == FAST_VADD
    events = [json.loads(ln) for ln in (run / "trace.jsonl").read_text().splitlines()]
    writes = [e for e in events if e["node"] == "write"]
    assert [e["ok"] for e in writes] == [True, False, False, True]
    assert "does not compile" in writes[1]["summary"]
    assert "not correct" in writes[2]["summary"]

    # the speedup against the reference itself (NumPy), timed on this machine
    vs = res["vs_reference"]
    assert vs["speedup"] and vs["speedup"] > 0
    assert [c["case"] for c in vs["cases"]] == ["n=1000000"]
    assert vs["cases"][0]["reference_ms"] > 0 and vs["cases"][0]["best_ms"] > 0
    assert res["tokens"]["calls"] == len(srv.exchanges)


def test_a_reference_only_op_with_the_heuristic_crew_is_one_clear_line():
    p = kernelcrew("optimize", OP, "--agents", "heuristic", "--max-iters", "1", "--no-memory",
                   timeout=120)
    assert p.returncode == 2, p.stderr
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, p.stderr
    assert "no cpu baseline" in lines[0] and "op.yaml" in lines[0]
    assert "baseline.cpp" in lines[0] and "--agents llm" in lines[0]
