"""`kernelcrew check` on .cu files through the real command line: refused sources come
back as a `rejected` verdict naming the line; without a device the check compiles only
and says it could not run."""

from __future__ import annotations

import json

import pytest

from kernelcrew.tools.backends.cuda import CudaBackend
from tests.cuda.helpers import FIXTURES, OPS, baseline_cu, fast_cu, run_cli

# file -> (line of the offence in the file, words the reason must hold)
REFUSED = {
    "host_function.cu": (11, "host code is not allowed"),
    "host_include.cu": (10, "include"),
    "inline_asm.cu": (14, "inline assembly"),
    "device_printf.cu": (13, "printf"),
    "clock_read.cu": (13, "clock"),
}


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_policy_refusal_is_a_rejected_verdict_with_the_line(name: str) -> None:
    line, words = REFUSED[name]
    proc = run_cli("check", "scale_shift_sum", str(FIXTURES / "bad" / name), "--json")
    assert proc.returncode == 1, proc.stderr
    res = json.loads(proc.stdout)
    assert res["verdict"] == "rejected" and res["correct"] is False
    assert res["reason"].startswith("refused before compiling")
    assert f"line {line}:" in res["reason"]
    assert words in res["reason"]


def test_compile_error_is_a_rejected_verdict_with_the_line(tmp_path, needs_nvcc) -> None:
    src = (FIXTURES / "bad" / "clock_read.cu").read_text().replace(
        "long long t = clock64();", "long long t = no_such_function_here();")
    path = tmp_path / "typo.cu"
    path.write_text(src)
    proc = run_cli("check", "scale_shift_sum", str(path), "--json")
    assert proc.returncode == 1, proc.stderr
    res = json.loads(proc.stdout)
    assert res["verdict"] == "rejected"
    assert "no_such_function_here" in res["reason"]
    msg = res["compile"]["messages"][0]
    assert msg["line"] == 13 and msg["kind"] == "error"


@pytest.mark.skipif(CudaBackend().can_run()[0], reason="a CUDA device is present: check runs")
@pytest.mark.parametrize("which", ["baseline", "fast"])
def test_without_a_device_check_compiles_only_and_says_so(which: str, needs_nvcc) -> None:
    op = "softmax_rows"
    path = baseline_cu(op) if which == "baseline" else fast_cu(op)
    proc = run_cli("check", op, str(path), "--json")
    assert proc.returncode == 0, proc.stderr
    res = json.loads(proc.stdout)
    assert res["ran"] is False and res["correct"] is None
    assert res["reason"].startswith("compiled only, not run:")
    assert {r["status"] for r in res["rows"]} == {"pending"}
    regs = {k["kernel"]: k["registers"] for k in res["compile"]["resources"]}
    assert regs and all(r > 0 for r in regs.values())

    text = run_cli("check", op, str(path))
    assert text.returncode == 0, text.stderr
    assert "compiled only, not run" in text.stdout
    assert "registers" in text.stdout and "spill_st_B" in text.stdout


QUICK_CLI = {"histogram", "stencil5"}


@pytest.mark.skipif(CudaBackend().can_run()[0], reason="a CUDA device is present: check runs")
@pytest.mark.parametrize("op", [pytest.param(o, marks=() if o in QUICK_CLI else pytest.mark.slow)
                                for o in OPS])
def test_check_of_every_cuda_kernel_without_a_device_gives_static_evidence(op, needs_nvcc):
    """Baseline and fast kernel of every CUDA op: compiled, not run, a pending row for every
    CUDA shape group (the datacenter typical cases and the small ones), and the compiler's
    evidence for every launched kernel: registers, spills, occupancy, SASS counts."""
    from kernelcrew.kernels.spec import load_op

    groups = set(load_op(op, "cuda").shapes)
    for path in (baseline_cu(op), fast_cu(op)):
        proc = run_cli("check", op, str(path), "--json")
        assert proc.returncode == 0, proc.stderr[-2000:]
        res = json.loads(proc.stdout)
        assert res["ran"] is False and res["correct"] is None and res["speedup"] is None
        assert {r["group"] for r in res["rows"]} == groups
        assert {r["status"] for r in res["rows"]} == {"pending"}
        static = res["static"]
        assert static["arch"] == "sm_90" and static["launches"] >= 1
        launched = [k for k in static["kernels"] if k["launched"]]
        assert launched and all(k["registers"] > 0 and k["spill_bytes"] == 0 for k in launched)
        assert all(k["sass"] and k["sass"]["instructions"] > 0 for k in launched), launched
        assert "regs" in static["text"] and "SASS" in static["text"]
