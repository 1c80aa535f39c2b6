"""Bad input exits 2 with one line naming the file and the problem."""

from __future__ import annotations

import re

import pytest

from tests.conftest import kernelcrew


def _one_line_error(res, *needles: str) -> str:
    assert res.returncode == 2, res.stdout + res.stderr
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, res.stderr
    for n in needles:
        assert n in lines[0], lines[0]
    return lines[0]


@pytest.mark.parametrize(
    ("edit", "needles"),
    [
        (lambda y: y.replace("family: elementwise\n", ""), ["op.yaml", "family", "missing"]),
        (lambda y: y.replace("x: {dtype: float32", "x: {dtype: float33"),
         ["op.yaml", "inputs.x.dtype", "float32"]),
        (lambda y: y.replace("shape: [n]}\n  z", "shape: [m]}\n  z"),
         ["op.yaml", "inputs.x.shape", "undefined size symbol", "'m'"]),
        (lambda y: y.replace("bytes: 12*n", "bytes: \"__import__('os')\""),
         ["op.yaml", "cost.bytes", "not allowed"]),
        (lambda y: y.replace("tolerance: {rtol: 1e-5", "tolerance: {rtol: abc"),
         ["op.yaml", "tolerance.rtol"]),
    ],
    ids=["missing-field", "unknown-dtype", "undefined-size", "import-expression", "bad-float"],
)
def test_malformed_op_yaml_exits_2_naming_file_and_field(op_copy, edit, needles):
    op = op_copy("vadd")
    yml = op / "op.yaml"
    yml.write_text(edit(yml.read_text()))
    res = kernelcrew("check", str(op), str(op / "baseline.cpp"), "--reps", "3")
    _one_line_error(res, *needles)


def test_kernel_without_front_matter_exits_2(op_copy, tmp_path):
    op = op_copy("vadd")
    bare = tmp_path / "bare.cpp"
    bare.write_text(re.sub(r"/\* kernelcrew.*?\*/\n", "", (op / "baseline.cpp").read_text(),
                           flags=re.DOTALL))
    res = kernelcrew("check", str(op), str(bare))
    _one_line_error(res, "bare.cpp", "front matter")


def test_reference_that_raises_exits_2(op_copy):
    op = op_copy("vadd")
    (op / "reference.py").write_text("def reference(**kw):\n    raise ValueError('boom')\n")
    res = kernelcrew("check", str(op), str(op / "baseline.cpp"), "--reps", "3")
    _one_line_error(res, "reference.py", "ValueError", "boom")


def test_unknown_operator_exits_2():
    res = kernelcrew("check", "no_such_op", "x.cpp")
    _one_line_error(res, "no_such_op")


def test_split_expression_is_explained(op_copy, tmp_path):
    op = op_copy("vadd")
    cu = tmp_path / "k.cu"
    cu.write_text("/* kernelcrew\nknobs: {B: 256}\nlaunch:\n  - kernel: k\n"
                  "    grid: [ceil_div(n, B)]\n    block: [B]\n    args: [x, z, y, n]\n*/\n"
                  'extern "C" __global__ void k(const float* x, const float* z, float* y, '
                  "long long n) {}\n")
    res = kernelcrew("check", str(op), str(cu))
    _one_line_error(res, "k.cu", "quote it")


@pytest.mark.parametrize("args", [
    ("optimize", "vadd", "--reps", "0"),  # used to crash in the baseline node
    ("optimize", "vadd", "--max-iters", "0"),
    ("optimize", "vadd", "--candidates-per-iter", "0"),
    ("optimize", "vadd", "--patience", "-1"),
    ("optimize", "vadd", "--budget-s", "-5"),
    ("optimize", "vadd", "--roofline-done", "most"),
    ("check", "vadd", "--timeout", "0"),
    ("eval", "--budget", "0"),
    ("memory", "list", "--limit", "zero"),
])
def test_counts_and_durations_must_be_above_zero(args):
    res = kernelcrew(*args)
    assert res.returncode == 2, res.stderr
    err = res.stderr.strip().splitlines()[-1]
    assert f"argument {args[-2]}:" in err and ("must be above 0" in err or "not a number" in err)
    assert "Traceback" not in res.stderr
