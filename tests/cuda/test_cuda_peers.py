"""The CUDA peers (kernelcrew/evals/peers/cuda_peers.py) without a device: every CuPy
expression computes its op (NumPy standing in for CuPy, checked against the float64
reference), the child's timing logic runs through the host stand-in, nvcc alone is what it
says, the FP32 peak and the shares are computed as documented, and without a device every
row says why nothing ran. On a device test_gpu.py times the real thing."""

from __future__ import annotations

import json

import numpy as np
import pytest

from kernelcrew.evals.peers import cuda_peers as CP
from kernelcrew.evals.peers.common import make_inputs, reference_outputs
from kernelcrew.evals.peers.cupy_expressions import CUPY_EXPRESSIONS
from kernelcrew.evals.peers.roofline import Peaks
from kernelcrew.kernels.kernelfile import load_kernel
from kernelcrew.kernels.spec import DTYPES, load_op
from kernelcrew.tools.backends.cuda import CudaBackend
from kernelcrew.tools.backends.peaks import fp32_peak_gflops
from tests.cuda.library_emu import CUDA_OPS, scaled


def test_every_cuda_op_has_a_cupy_expression():
    assert set(CUDA_OPS) <= set(CUPY_EXPRESSIONS)


@pytest.mark.parametrize("op", CUDA_OPS)
def test_cupy_expressions_compute_the_op_through_numpy(op):
    """Every expression on every CUDA group (typical and small scaled down as the
    emulation runs them), NumPy in CuPy's place: the same calls, the same dtypes."""
    spec = load_op(op, "cuda")
    scalars = {n: DTYPES[s.dtype].type(s.value) for n, s in spec.scalars.items()}
    for case in spec.cases():
        sizes = scaled(spec, case.sizes)
        ins = make_inputs(spec, sizes, np.random.default_rng(5))
        ref = reference_outputs(spec, sizes, ins)
        for label, fn in CUPY_EXPRESSIONS[op]:
            got = fn(np, **ins, **scalars, **sizes)
            for name, want in ref.items():
                g = np.asarray(got[name])
                assert g.shape == want.shape, (label, case.group, sizes)
                assert np.allclose(g.astype(np.float64), want, rtol=spec.tolerance.rtol,
                                   atol=spec.tolerance.atol), (label, case.group, sizes)
                if spec.outputs[name].dtype == "float32":  # no silent float64 upcast
                    assert g.dtype == np.float32, (label, g.dtype)


def test_the_cupy_child_times_checks_and_flushes_through_the_stand_in():
    spec = load_op("scale_shift_sum", "cuda")
    dev = CP.HostStandIn(l2_bytes=1 << 20)
    job = {"op": str(spec.folder), "reps": 5, "seed": 1, "cases": [
        {"rows": 64, "cols": 100}, {"rows": 3, "cols": 7}], "cache": ["cold", "warm"]}
    out = CP.cupy_child(job, device=dev)
    assert set(out["variants"]) == {label for label, _ in CUPY_EXPRESSIONS["scale_shift_sum"]}
    for rows in out["variants"].values():
        assert [r["cache"] for r in rows] == ["cold", "warm"]
        assert all(r["correct"] and r["median_ms"] > 0 and r["runs_per_timing"] >= 1
                   for r in rows)
        assert rows[0]["p10_ms"] <= rows[0]["median_ms"] <= rows[0]["p90_ms"]
    # every timing of the cold case (one to size it, five timed) followed a flush, per
    # expression; the warm case none
    assert dev.flushes == 2 * (1 + 5)
    res = CP.assemble_cupy("scale_shift_sum", out)
    assert res.expression in res.variants and res.typical_ms == min(res.variants.values())


def test_a_wrong_expression_is_never_the_peer(monkeypatch):
    spec = load_op("gelu_tanh", "cuda")
    right = CUPY_EXPRESSIONS["gelu_tanh"][0]
    monkeypatch.setitem(CUPY_EXPRESSIONS, "gelu_tanh", [
        right, ("x (wrong, and fast)", lambda xp, x, **_: {"y": x})])
    out = CP.cupy_child({"op": str(spec.folder), "reps": 3, "seed": 2,
                         "cases": [{"n": 999}]}, device=CP.HostStandIn())
    assert out["variants"]["x (wrong, and fast)"][0]["correct"] is False
    assert CP.assemble_cupy("gelu_tanh", out).expression == right[0]
    monkeypatch.setitem(CUPY_EXPRESSIONS, "gelu_tanh", [("x", lambda xp, x, **_: {"y": x})])
    out = CP.cupy_child({"op": str(spec.folder), "reps": 3, "seed": 2,
                         "cases": [{"n": 999}]}, device=CP.HostStandIn())
    res = CP.assemble_cupy("gelu_tanh", out)
    assert res.expression is None and "no CuPy expression gave correct" in res.error


def test_nvcc_alone_is_the_source_at_o3_with_the_default_block():
    for op in CUDA_OPS:
        base = load_kernel(load_op(op).baseline_path("cuda"))
        alone = CP.nvcc_alone(base)
        assert alone.meta.flags == ["-O3"] and alone.body == base.body
        if "BLOCK" in base.meta.knobs:
            assert alone.meta.knobs["BLOCK"] == 256
    # a baseline written with other flags and another block is changed back
    base = load_kernel(load_op("attention").baseline_path("cuda"))
    odd = base.with_changes(flags=["-O1"], knobs={"BLOCK": 64})
    assert CP.nvcc_alone(odd).meta.flags == ["-O3"]
    assert CP.nvcc_alone(odd).meta.knobs["BLOCK"] == 256


def test_fp32_peak_from_the_spec_sheet_numbers():
    # H100 SXM and H200: 132 SMs x 128 lanes x 2 x 1.98 GHz; A100: 108 x 64 x 2 x 1.41 GHz
    assert fp32_peak_gflops(132, 1_980_000, (9, 0)) == pytest.approx(66908.16)
    assert fp32_peak_gflops(108, 1_410_000, [8, 0]) == pytest.approx(19491.84)
    assert fp32_peak_gflops(132, None, (9, 0)) is None
    assert fp32_peak_gflops(132, 1_980_000, (99, 9)) is None


def test_shares_of_copy_bandwidth_and_fp32_rate():
    peaks = Peaks(gbps=4000.0, gflops=60000.0, source="test")
    spec = load_op("rmsnorm", "cuda")
    nbytes = sum(spec.cost_bytes(c) for c in spec.shapes["typical"].cases)
    row = CP.CudaPeerRow("rmsnorm", ms={"hand-written": nbytes / 4e9 / 0.8,
                                        "baseline": None})
    CP.fill_shares(row, spec, peaks)
    assert row.limit == "bandwidth"
    assert row.shares["hand-written"]["bandwidth"] == pytest.approx(0.8)
    assert "baseline" not in row.shares
    spec = load_op("conv2d", "cuda")
    flops = sum(spec.cost_flops(c) for c in spec.shapes["typical"].cases)
    row = CP.CudaPeerRow("conv2d", ms={"crew": flops / 60e9 / 0.5})
    CP.fill_shares(row, spec, peaks)
    assert row.limit == "compute"
    assert row.shares["crew"]["compute"] == pytest.approx(0.5)


@pytest.mark.skipif(CudaBackend().can_run()[0], reason="a CUDA device is present")
def test_without_a_device_every_row_says_why(tmp_path, capsys):
    out = tmp_path / "peers.json"
    assert CP.main(["--ops", "rmsnorm,histogram", "--out", str(out)]) == 0
    data = json.loads(out.read_text())
    assert data["device"] is False
    assert [r["op"] for r in data["rows"]] == ["rmsnorm", "histogram"]
    assert all(r["skipped"].startswith("no device: ") and not r["ms"] for r in data["rows"])
    assert "no device" in capsys.readouterr().out
    assert CP.cupy_peer("rmsnorm").error.startswith("no device: ")
    assert CP.peers_of("rmsnorm").skipped.startswith("no device: ")


def test_unknown_op_is_a_usage_error(capsys):
    assert CP.main(["--ops", "rmsnorm,no_such_op"]) == 2
    assert "no_such_op has no CUDA baseline" in capsys.readouterr().err


def test_markdown_table_rows():
    rows = [CP.CudaPeerRow("rmsnorm", skipped="no device: none here"),
            CP.CudaPeerRow("ddot", ms={"baseline": 2.0, "hand-written": 0.5, "CuPy": 1.0},
                           shares={"hand-written": {"bandwidth": 0.9, "compute": None}})]
    text = CP.markdown(rows, "copy 4000 GB/s")
    assert "| rmsnorm |" in text and "no device: none here" in text
    assert "| ddot | 2 | - | 0.5 | - | 1 | 90%/- | 2.00x |" in text
    assert "Peaks: copy 4000 GB/s" in text


def test_the_bench_part_renders_a_skip_and_measured_rows():
    from kernelcrew.evals.bench.sections import SECTIONS
    from kernelcrew.evals.bench.sections import cuda as part

    assert SECTIONS[-1] is part.SECTION
    text = "\n".join(part.render({"cuda": {"skipped": "no device: none here", "rows": []}}))
    assert "Not measured: no device: none here" in text
    assert part.goals({"cuda": {"skipped": "no device", "rows": []}}) == []
    rows = [CP.CudaPeerRow("rmsnorm", ms={"baseline": 2.0, "hand-written": 0.5, "CuPy": 1.0},
                           limit="bandwidth", shares={"hand-written": {"bandwidth": 0.9}}),
            CP.CudaPeerRow("softmax_rows", ms={"hand-written": 2.0, "CuPy": 1.0},
                           limit="bandwidth", shares={"hand-written": {"bandwidth": 0.5}})]
    from dataclasses import asdict

    data = {"cuda": {"skipped": "", "rows": [asdict(r) for r in rows], "peaks": "copy 4 TB/s"}}
    text = "\n".join(part.render(data))
    assert "| rmsnorm | 2 |" in text and "Peaks: copy 4 TB/s" in text
    g = part.goals(data)
    assert g[0][2] == "1 of 2" and "missed" in g[0][3]
    assert g[1][2] == "1 of 2"
