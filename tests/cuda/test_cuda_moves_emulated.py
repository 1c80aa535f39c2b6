"""The CUDA crew's moves keep kernels correct (must-show 1 of the issue on the crew's GPU
moves), checked without a GPU: each move applied to library baselines and to kernels
written the ways such code is found (tests/cuda/emu/kernels: a 2-D textbook matmul, a
linear layer with __ldg and a bias, a batched product decoded through a quotient, half
operands, per-element atomics, the CUDA samples' block sum, a softmax with an if-max, a
kernel per pass), compiled as host C++ under tests/cuda/emu/kc_emu.h and its launch plan
run against the float64 reference on every shape group of the op, plus sizes that cross
several tiles in both directions.

The emulator runs threads as fibers with the hardware's ordering (barriers, shuffles,
warp-collective tensor-core fragments, asynchronous copies that land only at the wait):
the tests below show it catches a missing wait and a missing barrier. Every case runs
under two schedules: all threads that can move each round, and one warp running ahead of
the others (KC_EMU_SCHEDULE=ahead)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from kernelcrew.agents.transforms import apply_transform
from kernelcrew.evals.peers import make_inputs, reference_outputs
from kernelcrew.kernels.spec import load_op
from kernelcrew.tools.judge.verify import compare
from tests.cuda.emulate import build, run
from tests.cuda.test_cuda_transforms_emulated import shrink

EMU = Path(__file__).parent / "emu"
HALF = {"rtol": 1e-3, "atol": 1e-3}
TF32 = {"rtol": 1e-2, "atol": 1e-2, "tf32": 1}

# (op: a library name or a folder of tests/cuda/emu/ops, kernel: a file of
# tests/cuda/emu/kernels or None for the op's baseline.cu, [(move, params)...], extra sizes)
CASES = [
    ("small_matmul", None, [("matmul_tile", {})], [{"batch": 2, "m": 70, "k": 20, "n": 130}]),
    ("small_matmul", None, [("matmul_tile", {"tile_m": 32, "tile_n": 32, "reg_m": 2,
                                             "reg_n": 2}), ("async_copy", {})],
     [{"batch": 2, "m": 45, "k": 40, "n": 33}]),
    ("small_matmul", "batched_quotient", [("matmul_tile", {})],
     [{"batch": 3, "m": 66, "k": 9, "n": 65}]),
    ("sgemm", "sgemm_2d", [("matmul_tile", {}), ("async_copy", {}), ("launch_bounds", {})], []),
    ("gemm_nt", "gemm_nt_flat", [("matmul_tile", {})], []),
    ("hgemm", "hgemm_2d", [("tensor_core", HALF)], []),
    ("hgemm", "hgemm_2d", [("matmul_tile", {})], []),
    ("sgemm_tf32", "sgemm_2d", [("tensor_core", TF32), ("async_copy", {})], []),
    ("transpose", None, [("smem_tile", {}), ("async_copy", {})], []),
    ("transpose", None, [("coarsen", {})], []),
    ("add_gelu_muladd", None, [("launch_fusion", {}), ("coarsen", {})], []),
    ("ddot", "dot_atomic", [("atomic_reduce", {})], [{"n": 70000}]),
    ("ddot", "dot_tree", [("atomic_reduce", {})], [{"n": 70000}]),
    ("softmax_rows", None, [("online_softmax", {})], []),
    ("softmax_rows", None, [("block_reduce", {}), ("online_softmax", {})], []),
    ("softmax_rows", "softmax_if_max", [("block_reduce", {}), ("online_softmax", {})], []),
    ("rmsnorm", "rms_two_pass", [("launch_fusion", {}), ("block_reduce", {})], []),
    ("colsum", "column_max_sum", [("split_reduce", {})], [{"rows": 1000, "cols": 40}]),
    ("haxpb", "haxpb", [("vector_access", {})], [{"n": 4099}]),
    ("square_blur", "square_blur", [("launch_fusion", {})], [{"n": 129}, {"n": 255}]),
]


def spec_of(op: str):
    folder = EMU / "ops" / op
    return load_op(folder if folder.is_dir() else op)


def text_of(op: str, kernel: str | None) -> str:
    if kernel is None:
        return spec_of(op).baseline_path("cuda").read_text()
    return (EMU / "kernels" / f"{kernel}.cu").read_text()


def rewritten(op: str, kernel: str | None, seq) -> str:
    text = text_of(op, kernel)
    for name, params in seq:
        new = apply_transform(name, text, params)
        assert new is not None, f"{name} does not apply to {kernel or op} after {seq}"
        text = new
    return text


def check_all(spec, text: str, work: Path, extra: list[dict]) -> set[str]:
    exe = build(text, spec, work)
    groups = set()
    cases = [(c.group, shrink(spec, c.sizes)) for c in spec.cases()]
    cases += [("extra", sizes) for sizes in extra]
    for group, sizes in cases:
        ins = make_inputs(spec, sizes, np.random.default_rng(11))
        out = run(exe, text, spec, sizes, ins, work)
        ref = reference_outputs(spec, sizes, ins)
        for n, r in ref.items():
            cmp = compare(n, out[n], r, spec.tolerance.rtol, spec.tolerance.atol)
            assert cmp.ok, f"{group} {sizes}: {cmp}"
        groups.add(group)
    return groups


def _id(case) -> str:
    op, kernel, seq, _ = case
    return f"{kernel or op}-{'+'.join(n for n, _ in seq)}"


@pytest.mark.slow  # 5-40 s each on 2 cores: a g++ build and every case emulated twice
@pytest.mark.parametrize("case", CASES, ids=[_id(c) for c in CASES])
def test_move_matches_the_reference_on_every_group(case, tmp_path, monkeypatch):
    op, kernel, seq, extra = case
    spec = spec_of(op)
    text = rewritten(op, kernel, seq)
    assert check_all(spec, text, tmp_path, extra) >= set(spec.shapes)
    monkeypatch.setenv("KC_EMU_SCHEDULE", "ahead")
    assert check_all(spec, text, tmp_path, extra) >= set(spec.shapes)


def test_the_kernels_of_the_wild_are_right_before_the_moves(tmp_path):
    """The test kernels themselves match their ops (so a move's pass is not luck)."""
    for op, kernel in (("sgemm", "sgemm_2d"), ("gemm_nt", "gemm_nt_flat"),
                       ("colsum", "column_max_sum"), ("square_blur", "square_blur"),
                       ("hgemm", "hgemm_2d"), ("ddot", "dot_tree"),
                       ("softmax_rows", "softmax_if_max"), ("rmsnorm", "rms_two_pass")):
        spec = spec_of(op)
        sizes = next(c.sizes for c in spec.cases() if c.group == "boundary")
        text = text_of(op, kernel)
        exe = build(text, spec, tmp_path)
        ins = make_inputs(spec, sizes, np.random.default_rng(1))
        out = run(exe, text, spec, sizes, ins, tmp_path)
        for n, r in reference_outputs(spec, sizes, ins).items():
            assert compare(n, out[n], r, spec.tolerance.rtol, spec.tolerance.atol).ok, kernel


def test_a_tiled_product_across_several_tiles(tmp_path):
    """matmul_tile on small_matmul where the tiles do not divide the sizes in any
    direction: rows, columns and the reduction all have partial tiles."""
    spec = spec_of("small_matmul")
    text = rewritten("small_matmul", None, [("matmul_tile", {})])
    exe = build(text, spec, tmp_path)
    sizes = {"batch": 2, "m": 70, "k": 21, "n": 131}
    ins = make_inputs(spec, sizes, np.random.default_rng(4))
    out = run(exe, text, spec, sizes, ins, tmp_path)
    ref = reference_outputs(spec, sizes, ins)
    assert compare("c", out["c"], ref["c"], spec.tolerance.rtol, spec.tolerance.atol).ok


def test_the_emulation_catches_a_missing_wait_for_the_asynchronous_copies(tmp_path):
    """async_copy's copies land only at __pipeline_wait_prior: with the wait dropped the
    tile is read before the copies arrive and the result is wrong; with it, right."""
    spec = spec_of("small_matmul")
    text = rewritten("small_matmul", None, [("matmul_tile", {}), ("async_copy", {})])
    wait = "__pipeline_wait_prior(0);"
    assert text.count(wait) == 1
    sizes = {"batch": 2, "m": 20, "k": 20, "n": 20}
    ins = make_inputs(spec, sizes, np.random.default_rng(2))
    ref = reference_outputs(spec, sizes, ins)
    for t, ok in ((text, True), (text.replace(wait, ""), False)):
        exe = build(t, spec, tmp_path)
        out = run(exe, t, spec, sizes, ins, tmp_path)
        assert compare("c", out["c"], ref["c"], spec.tolerance.rtol,
                       spec.tolerance.atol).ok is ok


def test_the_emulation_catches_a_missing_barrier_in_the_tensor_core_tile(tmp_path,
                                                                       monkeypatch):
    """The tensor-core kernel's accumulators go through shared memory to the epilogue:
    without the barrier between the fragments' stores and the epilogue's reads, a warp
    that runs ahead (KC_EMU_SCHEDULE=ahead) reads tiles other warps have not stored
    yet."""
    monkeypatch.setenv("KC_EMU_SCHEDULE", "ahead")
    spec = spec_of("hgemm")
    text = rewritten("hgemm", "hgemm_2d", [("tensor_core", HALF)])
    marker = "wmma::mem_row_major);\n    __syncthreads();"
    assert marker in text
    broken = text.replace(marker, "wmma::mem_row_major);")
    sizes = {"m": 64, "k": 16, "n": 64}  # the whole tile: every warp's quarter is read
    ins = make_inputs(spec, sizes, np.random.default_rng(3))
    ref = reference_outputs(spec, sizes, ins)
    for t, ok in ((text, True), (broken, False)):
        exe = build(t, spec, tmp_path)
        out = run(exe, t, spec, sizes, ins, tmp_path)
        assert compare("c", out["c"], ref["c"], spec.tolerance.rtol,
                       spec.tolerance.atol).ok is ok
