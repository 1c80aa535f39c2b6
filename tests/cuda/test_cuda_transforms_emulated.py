"""The CUDA transforms keep the kernels correct (must-show 2 of the CUDA crew issue),
checked without a GPU: each library op's baseline.cu and its rewrites by the CUDA
transforms are compiled as host C++ under tests/cuda/emu/kc_emu.h (threads as fibers,
block barriers and warp shuffles with their hardware ordering) and their launch plans run
against the float64 reference on every shape group: typical, boundary (1 x 1 and below one
block) and unaligned (odd sizes: the vector path's tails and misaligned rows).

Sizes: the emulation runs every thread of a launch, so cases above EMU_ELEMENTS elements
(the op's cost-model bytes / 4) are shrunk by halving their largest size, an odd size
staying odd (tails and misalignment stay) — the typical cases and the two largest
unaligned ones run smaller than on a device; boundary cases run as they are."""

from __future__ import annotations

import numpy as np
import pytest

from kernelcrew.agents.transforms import apply_transform
from kernelcrew.evals.peers import make_inputs, reference_outputs
from kernelcrew.kernels.spec import load_op
from kernelcrew.tools.judge.verify import compare
from tests.cuda.emulate import build, run

EMU_ELEMENTS = 1 << 15

# op -> the transform sequences the crew's CUDA specialists apply to its baseline
REWRITES = {
    "add_gelu_muladd": [("launch_fusion",), ("launch_fusion", "vector_access"),
                        ("vector_access",)],
    "softmax_rows": [("block_reduce",)],
    "rmsnorm": [("block_reduce",)],
    "scale_shift_sum": [("block_reduce",)],
    "transpose": [("smem_tile",)],
    "small_matmul": [("vector_access",)],
}
CASES = [(op, seq) for op, seqs in REWRITES.items() for seq in seqs]


def shrink(spec, sizes: dict[str, int]) -> dict[str, int]:
    sizes = dict(sizes)
    while spec.cost_bytes(sizes) // 4 > EMU_ELEMENTS:
        k = max(sizes, key=sizes.get)
        v = sizes[k]
        sizes[k] = max(1, (v // 2) | 1 if v % 2 else v // 2)
    return sizes


def rewritten(op: str, seq: tuple[str, ...]) -> str:
    text = load_op(op).baseline_path("cuda").read_text()
    for name in seq:
        new = apply_transform(name, text)
        assert new is not None, f"{name} does not apply to {op} after {seq}"
        text = new
    return text


@pytest.mark.slow  # ~10-30 s per op on 2 cores (one g++ build + every case emulated)
@pytest.mark.parametrize(("op", "seq"), CASES, ids=[f"{o}-{'+'.join(s)}" for o, s in CASES])
def test_rewritten_kernel_matches_the_reference_on_every_group(op, seq, tmp_path_factory):
    spec = load_op(op)
    text = rewritten(op, seq)
    work = tmp_path_factory.mktemp("emu")
    exe = build(text, spec, work)
    groups = set()
    for c in spec.cases():
        sizes = shrink(spec, c.sizes)
        ins = make_inputs(spec, sizes, np.random.default_rng(7))
        out = run(exe, text, spec, sizes, ins, work)
        ref = reference_outputs(spec, sizes, ins)
        for n, r in ref.items():
            cmp = compare(n, out[n], r, spec.tolerance.rtol, spec.tolerance.atol)
            assert cmp.ok, f"{op} {seq} {c.group} {sizes}: {cmp}"
        groups.add(c.group)
    assert groups == set(spec.shapes)


def test_the_emulation_catches_a_missing_barrier(tmp_path):
    """The emulator is not a sequential loop: a block reduction whose barrier before the
    final read is dropped reads a value not yet written, and the check fails."""
    spec = load_op("softmax_rows")
    text = rewritten("softmax_rows", ("block_reduce",))
    marker = "    __syncthreads();\n    return kc_part[0];"
    assert marker in text
    broken = text.replace(marker, "    return kc_part[0];")
    exe = build(broken, spec, tmp_path)
    sizes = {"rows": 3, "cols": 1000}
    ins = make_inputs(spec, sizes, np.random.default_rng(1))
    out = run(exe, broken, spec, sizes, ins, tmp_path)
    ref = reference_outputs(spec, sizes, ins)
    assert not compare("y", out["y"], ref["y"], spec.tolerance.rtol, spec.tolerance.atol).ok
    exe = build(text, spec, tmp_path)  # and the kernel as rewritten passes
    out = run(exe, text, spec, sizes, ins, tmp_path)
    assert compare("y", out["y"], ref["y"], spec.tolerance.rtol, spec.tolerance.atol).ok


def test_the_vector_path_and_its_tail_both_run(tmp_path):
    """add_gelu_muladd after fusion + vector access: sizes that are a multiple of VEC run
    the float4 path only, odd sizes the scalar tail too; both match the reference."""
    spec = load_op("add_gelu_muladd")
    text = rewritten("add_gelu_muladd", ("launch_fusion", "vector_access"))
    exe = build(text, spec, tmp_path)
    for sizes in ({"rows": 4, "cols": 64}, {"rows": 3, "cols": 7}, {"rows": 1, "cols": 3}):
        ins = make_inputs(spec, sizes, np.random.default_rng(3))
        out = run(exe, text, spec, sizes, ins, tmp_path)
        ref = reference_outputs(spec, sizes, ins)
        assert compare("y", out["y"], ref["y"], spec.tolerance.rtol, spec.tolerance.atol).ok


def test_a_shared_memory_tree_becomes_shuffles_and_stays_correct(tmp_path):
    """block_reduce on a kernel that already has one block per row and a shared-memory
    tree (tests/cuda/fixtures/ok/two_pass_temps.cu, a two-launch scale_shift_sum): the tree
    becomes kc_block_reduce; the emulated launch plan matches the reference, before and
    after, on a short row, a row below one block and an odd one."""
    from tests.cuda.helpers import FIXTURES

    spec = load_op("scale_shift_sum")
    before = (FIXTURES / "ok" / "two_pass_temps.cu").read_text()
    after = apply_transform("block_reduce", before)
    assert after is not None and "kc_block_reduce<kc_op_sum>(buf[threadIdx.x])" in after
    assert "s >>= 1" not in after
    for text in (before, after):
        exe = build(text, spec, tmp_path)
        for sizes in ({"rows": 3, "cols": 1000}, {"rows": 2, "cols": 5}, {"rows": 1, "cols": 1}):
            ins = make_inputs(spec, sizes, np.random.default_rng(5))
            out = run(exe, text, spec, sizes, ins, tmp_path)
            ref = reference_outputs(spec, sizes, ins)
            assert compare("out", out["out"], ref["out"], spec.tolerance.rtol,
                           spec.tolerance.atol).ok, (text is after, sizes)


GATHER_TRANSPOSE = """/* kernelcrew
flags: [-O3]
knobs: {BLOCK: 128}
launch:
  - kernel: gather
    grid: ["ceil_div(rows*cols, BLOCK)"]
    block: [BLOCK]
    args: [x, y, rows, cols]
*/
// the other way round: one thread per element of y, gathering strided reads of x
extern "C" __global__ void gather(const float* __restrict__ x, float* __restrict__ y,
                                  long long rows, long long cols) {
    long long idx = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= cols * rows) return;
    long long c = idx / rows;
    long long r = idx % rows;
    y[idx] = __ldg(&x[r * cols + c]);
}
"""


def test_smem_tile_on_a_gathering_transpose(tmp_path):
    """smem_tile when the read is the strided side (y written in order, x gathered): the
    tile is read along x's rows and written along y's; emulated against the reference on
    sizes with partial edge tiles in both directions and below one tile."""
    spec = load_op("transpose")
    after = apply_transform("smem_tile", GATHER_TRANSPOSE)
    assert after is not None and "kc_tile[TILE][TILE + 1]" in after
    for text in (GATHER_TRANSPOSE, after):
        exe = build(text, spec, tmp_path)
        for sizes in ({"rows": 33, "cols": 31}, {"rows": 1, "cols": 1}, {"rows": 70, "cols": 5}):
            ins = make_inputs(spec, sizes, np.random.default_rng(2))
            out = run(exe, text, spec, sizes, ins, tmp_path)
            ref = reference_outputs(spec, sizes, ins)
            assert compare("y", out["y"], ref["y"], 0.0, 0.0).ok, (text is after, sizes)
