"""Each CUDA transform does what it claims, read from what nvcc built for sm_90 (must-show
1 of the CUDA crew issue, no device needed): ptxas resources and the SASS of the cubin.

- vector_access: 128-bit global loads and stores (LDG.E.128 / STG.E.128) where the
  baseline has none;
- block_reduce: warp shuffles (SHFL) and block barriers (BAR) where the baseline has none;
- smem_tile: shared-memory loads and stores (LDS/STS), a barrier, and the padded tile's
  32 x 33 floats in ptxas' static shared memory;
- launch_fusion: add_gelu_muladd's three launches become one kernel in the cubin, one
  launch in the plan, and no temps;
- none of them spills (no local-memory instructions, ptxas: 0 spill bytes).
"""

from __future__ import annotations

import functools

import pytest

from kernelcrew.agents.transforms import apply_transform
from kernelcrew.kernels.kernelfile import parse_kernel_text
from kernelcrew.kernels.spec import load_op
from kernelcrew.tools.backends.cuda import CudaBackend, nvcc_path
from kernelcrew.tools.backends.sass import disassemble, sass_tool

pytestmark = [
    pytest.mark.skipif(nvcc_path() is None, reason="nvcc not found"),
    pytest.mark.skipif(sass_tool() is None, reason="cuobjdump not found (dev extra)"),
]


@functools.cache
def built(op: str, seq: tuple[str, ...]):
    """(kernel file, compile result, {kernel: features}) for op's baseline after seq."""
    spec = load_op(op)
    text = spec.baseline_path("cuda").read_text()
    for name in seq:
        new = apply_transform(name, text)
        assert new is not None, f"{name} does not apply to {op} after {seq}"
        text = new
    kf = parse_kernel_text(text, "cuda")
    be = CudaBackend()
    assert be.target_arch() == "sm_90" or not be.can_run()[0]
    res = be.compile(kf, spec)
    assert res.ok, res.reason + res.log[-800:]
    sass = {k: v.features() for k, v in disassemble(res.artifact).items()}
    return kf, res, sass


def _no_spills(res, sass) -> None:
    for r in res.resources:
        assert (r.spill_stores_bytes or 0) == 0 and (r.spill_loads_bytes or 0) == 0, r
    for k, f in sass.items():
        assert f["local_loads"] == 0 and f["local_stores"] == 0, (k, f)


# op, sequence, 128-bit loads expected (an array read at [i]), 128-bit stores expected
VECTOR = [("add_gelu_muladd", ("launch_fusion", "vector_access"), True, True),
          ("add_gelu_muladd", ("vector_access",), True, True),
          # c[idx] is the only access at the thread's index: stores only
          ("small_matmul", ("vector_access",), False, True)]


@pytest.mark.parametrize(("op", "seq", "loads", "stores"), VECTOR)
def test_vector_access_emits_128_bit_loads_and_stores(op, seq, loads, stores):
    _, _, base = built(op, ())
    kf, res, sass = built(op, seq)
    assert all(f["global_loads_128"] == 0 and f["global_stores_128"] == 0
               for f in base.values())
    launched = {lc.kernel for lc in kf.meta.launch}
    if loads:
        assert any(sass[k]["global_loads_128"] > 0 for k in launched), sass
    if stores:
        assert all(sass[k]["global_stores_128"] > 0 for k in launched), sass
    assert kf.meta.knobs["VEC"] == 4
    assert all("VEC" in str(lc.grid[0]) for lc in kf.meta.launch)
    _no_spills(res, sass)


@pytest.mark.parametrize("op", ["softmax_rows", "rmsnorm", "scale_shift_sum"])
def test_block_reduce_uses_warp_shuffles_and_one_shared_stage(op):
    _, _, base = built(op, ())
    kf, res, sass = built(op, ("block_reduce",))
    (f,) = sass.values()
    assert all(b["shuffles"] == 0 for b in base.values())
    assert f["shuffles"] >= 5 and f["barriers"] >= 2, f
    assert f["shared_stores"] >= 1 and f["shared_loads"] >= 1, f
    assert f["atomics"] == 0
    (r,) = res.resources
    assert r.shared_bytes == 32 * 4 * (2 if op == "softmax_rows" else 1) or r.shared_bytes \
        <= 32 * 4 * 2, r  # kc_part[32] per reduced type/site
    assert kf.meta.launch[0].grid == ["rows"]
    _no_spills(res, sass)


def test_smem_tile_moves_the_transpose_through_padded_shared_memory():
    _, _, base = built("transpose", ())
    kf, res, sass = built("transpose", ("smem_tile",))
    (f,) = sass.values()
    assert all(b["shared_loads"] == 0 and b["shared_stores"] == 0 for b in base.values())
    assert f["shared_loads"] > 0 and f["shared_stores"] > 0 and f["barriers"] >= 1, f
    (r,) = res.resources
    assert r.shared_bytes == 32 * 33 * 4  # TILE x (TILE + 1) floats: the padding is there
    lc = kf.meta.launch[0]
    assert lc.block == ["TILE", "TILE_ROWS"] and len(lc.grid) == 2
    _no_spills(res, sass)


def test_launch_fusion_makes_one_launch_of_three():
    base_kf, _base_res, base = built("add_gelu_muladd", ())
    kf, res, sass = built("add_gelu_muladd", ("launch_fusion",))
    assert len(base_kf.meta.launch) == 3 and len(base) == 3
    assert len(kf.meta.launch) == 1 and len(sass) == 1 and len(res.resources) == 1
    assert kf.meta.temps == {}  # h1 and h2 became registers
    (f,) = sass.values()
    # one kernel writes y once: the intermediates no longer go through memory
    assert f["global_stores"] == 1, f
    assert sum(b["global_stores"] for b in base.values()) == 3
    _no_spills(res, sass)


def test_a_shared_memory_tree_becomes_warp_shuffles():
    from tests.cuda.helpers import FIXTURES

    spec = load_op("scale_shift_sum")
    before = (FIXTURES / "ok" / "two_pass_temps.cu").read_text()
    after = apply_transform("block_reduce", before)
    be = CudaBackend()
    feats = []
    for text in (before, after):
        res = be.compile(parse_kernel_text(text, "cuda"), spec)
        assert res.ok, res.reason
        feats.append({k: v.features() for k, v in disassemble(res.artifact).items()})
        _no_spills(res, feats[-1])
    assert feats[0]["row_sums"]["shuffles"] == 0
    assert feats[1]["row_sums"]["shuffles"] >= 5
