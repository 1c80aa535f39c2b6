"""scripts/gpu_check.sh and its summary writer (scripts/gpu_summary.py) without a device:
argument handling, the dry run's plan within the budget, a real run that finds no GPU and
says so per stage, and the summary lines read from real command outputs' shapes."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT
from tests.cuda.library_emu import CUDA_OPS

SCRIPT = ROOT / "scripts" / "gpu_check.sh"
_spec = importlib.util.spec_from_file_location("gpu_summary", ROOT / "scripts" / "gpu_summary.py")
GS = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(GS)
STAGES = ["setup", "smoke", "bandwidth", "check", "tests", "profile", "crew", "peers"]


def script(*args: str, out: Path, timeout: float = 120) -> subprocess.CompletedProcess:
    env = {**os.environ, "OUT": str(out), "KERNELCREW_PYTHON": sys.executable,
           "PYTHONPATH": str(ROOT)}
    env.pop("KERNELCREW_GPU_OPS", None)
    env.pop("KERNELCREW_GPU_BUDGET_S", None)
    return subprocess.run(["bash", str(SCRIPT), *args], capture_output=True, text=True,
                          timeout=timeout, env=env, check=False)


def tsv(out: Path) -> list[list[str]]:
    return [ln.split("\t") for ln in (out / "summary.tsv").read_text().splitlines() if ln]


def test_help_lists_the_stages(tmp_path):
    r = script("--help", out=tmp_path)
    assert r.returncode == 0
    for s in STAGES:
        assert re.search(rf"^\s+{s}\s", r.stdout, re.MULTILINE), s
    assert "--dry-run" in r.stdout and "--budget" in r.stdout


@pytest.mark.parametrize(("args", "words"), [
    (["--bogus"], "unknown argument '--bogus'"),
    (["--budget", "ten"], "is not a whole number of seconds"),
    (["--budget", "5"], "too short"),
    (["--budget"], "--budget needs a number of seconds"),
    (["--stages", "check,nap"], "unknown stage 'nap'"),
    (["--ops", "rmsnorm,nope"], "'nope' is not a library op with a baseline.cu"),
])
def test_bad_arguments_are_one_line_errors_with_exit_2(tmp_path, args, words):
    r = script(*args, out=tmp_path / "o")
    assert r.returncode == 2
    assert words in r.stderr and "see --help" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "o" / "summary.txt").exists()  # nothing started


def test_dry_run_plans_every_stage_within_the_budget_and_runs_nothing(tmp_path):
    out = tmp_path / "o"
    r = script("--dry-run", "--budget", "5000", out=out)
    assert r.returncode == 0, r.stderr
    rows = tsv(out)
    assert all(s in {row[0] for row in rows} for s in STAGES[1:])
    planned = [row for row in rows if row[2] == "planned"]
    # with 5000 s every op is checked and optimized, in priority order
    checks = [row[1].split()[0] for row in planned if row[0] == "check"]
    crews = [row[1] for row in planned if row[0] == "crew"]
    assert sorted(checks) == sorted(CUDA_OPS) and sorted(crews) == sorted(CUDA_OPS)
    assert checks[:4] == ["add_gelu_muladd", "rmsnorm", "softmax_rows", "small_matmul"]
    plan = (out / "plan.txt").read_text().splitlines()
    boxes = [int(re.search(r"\(timeout (\d+)s\)", ln).group(1)) for ln in plan]
    assert len(plan) == len(planned) and sum(boxes) <= 5000
    assert all(b >= 10 for b in boxes)
    assert any("optimize add_gelu_muladd --backend cuda" in ln and "--max-iters 3" in ln
               for ln in plan)
    assert any("kernelcrew.evals.peers.cuda_peers" in ln and "--crew-runs" in ln for ln in plan)
    for f in ("summary.txt", "summary.md", "summary.json", "gpu-check.tar.gz"):
        assert (out / f).exists(), f
    assert json.loads((out / "summary.json").read_text())["failed"] == 0


def test_dry_run_with_a_short_budget_skips_the_rest_and_says_so(tmp_path):
    out = tmp_path / "o"
    r = script("--dry-run", "--budget", "200", "--stages", "check,crew", out=out)
    assert r.returncode == 0, r.stderr
    rows = tsv(out)
    assert {row[0] for row in rows} <= {"setup", "check", "crew", "run"}
    planned = [row for row in rows if row[2] == "planned"]
    cut = [row for row in rows if row[2] == "skipped: time budget"]
    assert planned and cut
    boxes = [int(re.search(r"\(timeout (\d+)s\)", ln).group(1))
             for ln in (out / "plan.txt").read_text().splitlines()]
    assert sum(boxes) <= 200
    # the crew's share is kept for it: the checks never take it
    assert any(row[0] == "crew" for row in planned)


def test_without_a_device_the_stages_say_so_and_the_kernels_still_compile(tmp_path):
    from kernelcrew.tools.backends.cuda import CudaBackend, nvcc_path

    if CudaBackend().can_run()[0] or nvcc_path() is None:
        pytest.skip("needs a machine with nvcc and without a CUDA device")
    out = tmp_path / "o"
    r = script("--stages", "setup,smoke,bandwidth,check,peers", "--ops", "histogram",
               "--budget", "120", out=out, timeout=300)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    rows = {(row[0], row[1]): row for row in tsv(out)}
    assert rows[("setup", "device")][2] == "no GPU"
    assert rows[("smoke", "transpose baseline")][2] == "skipped: no GPU"
    assert rows[("bandwidth", "device copy")][2] == "skipped: no GPU"
    check = rows[("check", "histogram fast")]
    assert check[2] == "skipped: no GPU" and "histogram_fast:" in check[3]
    assert rows[("peers", "all ops")][2] == "skipped: no GPU"
    assert "== kernelcrew GPU check" in (out / "summary.txt").read_text()


# -- the summary writer ----------------------------------------------------------------------
def _check_json(**kw) -> str:
    base = {"ran": True, "correct": True, "verdict": "faster", "speedup": 3.0, "reason": "",
            "rows": [{"group": "typical", "case": "rows=1000,cols=1000", "median_ms": 0.01},
                     {"group": "small", "case": "rows=10,cols=10", "median_ms": 0.001}],
            "compile": {"resources": [{"kernel": "k", "registers": 32}]}}
    return "compiling...\n" + json.dumps({**base, **kw})


def test_check_line_reports_bandwidth_and_the_goals():
    costs = {"rows=1000,cols=1000": 40_000_000}  # 40 MB in 0.01 ms: 4000 GB/s
    ln = GS.check_line(_check_json(), "rmsnorm", "fast", 4400.0, cost_bytes=costs,
                       family="normalization").split("\t")
    assert ln[:3] == ["check", "rmsnorm fast", "ok"]
    assert "typical 4000 GB/s = 91% of copy (goal 85%: met)" in ln[3]
    ln = GS.check_line(_check_json(), "rmsnorm", "fast", 5000.0, cost_bytes=costs,
                       family="normalization").split("\t")
    assert "80% of copy (goal 85%: NOT met)" in ln[3]
    ln = GS.check_line(_check_json(speedup=2.0), "add_gelu_muladd", "fast", 0.0,
                       cost_bytes=costs).split("\t")
    assert "(fused goal 2.5x: NOT met)" in ln[3]
    ln = GS.check_line(_check_json(), "conv2d", "fast", 4400.0, cost_bytes=costs,
                       family="convolution")
    assert "goal" not in ln  # compute-bound: no bandwidth goal


def test_check_line_failures_and_compile_only():
    ln = GS.check_line(_check_json(verdict="rejected", correct=False,
                                   reason="the parent's clock contradicts the worker"),
                       "rmsnorm", "fast", 0.0).split("\t")
    assert ln[2] == "FAIL" and "rejected: the parent's clock" in ln[3]
    ln = GS.check_line(_check_json(ran=False, correct=None), "rmsnorm", "fast", 0.0).split("\t")
    assert ln[2] == "skipped: no GPU" and "k:32" in ln[3]
    ln = GS.check_line("kernelcrew: the op's own baseline fails: wrong result\n", "rmsnorm",
                       "fast", 0.0).split("\t")
    assert ln[2] == "ERROR" and "baseline fails" in ln[3]


def test_profile_and_optimize_lines():
    prof = json.dumps({"source": "ncu", "bottleneck": {"kind": "memory"}, "summary": "s",
                       "metrics": {"dram_throughput_pct": {"value": 87.5}}})
    assert GS.profile_line(prof, "softmax_rows (ncu)", "ncu").split("\t")[2] == "ok"
    assert GS.profile_line(prof, "x (fallback)", "fallback").split("\t")[2].startswith("FAIL")
    opt = json.dumps({"ran": True, "iterations": 3, "best": {"speedup": 4.2, "correct": True},
                      "accepted": [{"kind": "block_reduce"}], "stop_reason": "max iters",
                      "table": [{"group": "typical"}, {"group": "small"}]})
    ln = GS.optimize_line(opt, "rmsnorm", "0").split("\t")
    assert ln[2] == "ok" and "best 4.20x" in ln[3] and "block_reduce" in ln[3]
    assert "groups small/typical" in ln[3]
    assert GS.optimize_line("Traceback ...\nKeyError: x", "rmsnorm", "1").split("\t")[2] == "FAIL"


def test_peers_lines_carry_shares_and_goals():
    data = {"rows": [
        {"op": "rmsnorm", "skipped": "no device: none"},
        {"op": "small_matmul", "ms": {"baseline": 3.0, "hand-written": 1.0, "crew": 2.5,
                                      "CuPy": 0.8}, "limit": "compute",
         "shares": {"hand-written": {"compute": 0.3}}, "errors": {}},
        {"op": "softmax_rows", "ms": {"baseline": 3.0, "hand-written": 1.0, "CuPy": 2.0},
         "limit": "bandwidth", "shares": {"hand-written": {"bandwidth": 0.9}},
         "errors": {"crew": "no best.cu"}},
        {"op": "ddot", "ms": {}, "errors": {"baseline": "failed a timed run"}}]}
    lines = [ln.split("\t") for ln in GS.peers_lines(data, 4000.0)]
    assert lines[0][2] == "skipped: no GPU"
    assert "hand-written vs CuPy 0.80x (half of cuBLAS: met)" in lines[1][3]
    assert "crew vs CuPy 0.32x (half of cuBLAS: NOT met)" in lines[1][3]
    assert "hand-written 90% of copy (met)" in lines[2][3] and lines[2][2] == "ok"
    assert lines[3][2] == "FAIL"


def test_render_writes_the_three_summaries(tmp_path):
    t = tmp_path / "s.tsv"
    t.write_text("check\trmsnorm fast\tok\t91% of copy (goal 85%: met)\n"
                 "check\tddot fast\tFAIL\trejected: x\n"
                 "crew\tddot\tskipped: time budget\t\n")
    text = GS.render(t, "12", tmp_path)
    assert "3 lines, 1 failed, 1 skipped; goals met 1, not met 0" in text
    data = json.loads((tmp_path / "summary.json").read_text())
    assert data["failed"] == 1 and data["rows"][0]["item"] == "rmsnorm fast"
    assert "| check | ddot fast | FAIL | rejected: x |" in (tmp_path / "summary.md").read_text()


def test_summary_cli_usage_errors(capsys):
    assert GS.main([]) == 2
    assert GS.main(["nope"]) == 2
    assert GS.main(["check", "only-one-arg"]) == 2
