"""Each CUDA crew move compiles for sm_90 and sm_80 on the kernels it applies to, and does
what it claims, read from ptxas and the SASS of the cubin (no device needed):

- matmul_tile: shared-memory staging (STS, LDS.128 reads of the operands, two barriers
  per slice), no spills;
- tensor_core: HMMA instructions (wmma), for half operands and for TF32;
- async_copy: LDGSTS (cp.async) where the staging copies were;
- atomic_reduce: warp shuffles, and no atomic per element any more (one per block);
- online_softmax / split_reduce / launch_fusion of a row pass / coarsen: as described
  in their modules, without spills.
"""

from __future__ import annotations

import functools
import os
from pathlib import Path

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

EMU = Path(__file__).parent / "emu"
HALF = {"rtol": 1e-3, "atol": 1e-3}
TF32 = {"rtol": 1e-2, "atol": 1e-2, "tf32": 1}
ARCHS = ("sm_90", "sm_80")


def spec_of(op: str):
    folder = EMU / "ops" / op
    return load_op(folder if folder.is_dir() else op)


@functools.cache
def built(op: str, kernel: str | None, seq: tuple, arch: str):
    """(kernel file, {kernel: ptxas resources}, {kernel: SASS}) for the rewrite."""
    spec = spec_of(op)
    text = spec.baseline_path("cuda").read_text() if kernel is None else \
        (EMU / "kernels" / f"{kernel}.cu").read_text()
    for name, params in seq:
        new = apply_transform(name, text, dict(params))
        assert new is not None, f"{name} does not apply to {kernel or op}"
        text = new
    kf = parse_kernel_text(text, "cuda")
    old = os.environ.get("KERNELCREW_CUDA_ARCH")
    os.environ["KERNELCREW_CUDA_ARCH"] = arch
    try:
        res = CudaBackend().compile(kf, spec)
    finally:
        if old is None:
            del os.environ["KERNELCREW_CUDA_ARCH"]
        else:
            os.environ["KERNELCREW_CUDA_ARCH"] = old
    assert res.ok, res.reason + res.log[-1500:]
    return kf, {r.kernel: r for r in res.resources}, disassemble(res.artifact)


def no_spills(res, sass) -> None:
    for r in res.values():
        assert not r.spill_stores_bytes and not r.spill_loads_bytes, r
    for k, s in sass.items():
        f = s.features()
        assert f["local_loads"] == 0 and f["local_stores"] == 0, (k, f)


P = tuple  # params as a hashable tuple of pairs


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize(("op", "kernel"), [("small_matmul", None), ("sgemm", "sgemm_2d"),
                                            ("gemm_nt", "gemm_nt_flat")])
def test_matmul_tile_stages_through_shared_memory_and_reads_vectors(op, kernel, arch):
    _, _, base = built(op, kernel, (), arch)
    kf, res, sass = built(op, kernel, (("matmul_tile", P()),), arch)
    (name,) = {lc.kernel for lc in kf.meta.launch}
    s, b = sass[name], base[name]
    assert b.count("LDS") == 0 and b.count("BAR") == 0
    assert s.count("STS") >= 2 and s.count("BAR") >= 2
    lds128 = sum(n for o, n in s.ops.items() if o.startswith("LDS") and ".128" in o)
    assert lds128 >= 32  # 16 steps x (REG_M + REG_N) / 4 floats per load
    assert s.count("FFMA") >= 256  # 16 steps x 4 x 4 outputs
    assert res[name].shared_bytes == 2 * 16 * 68 * 4  # the two padded slices
    no_spills(res, sass)


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize(("op", "kernel", "params", "steps"), [
    ("hgemm", "hgemm_2d", HALF, 2),  # 32 deep / 16 per step
    ("sgemm_tf32", "sgemm_2d", TF32, 4),  # 32 deep / 8 per TF32 step
])
def test_tensor_core_uses_hmma(op, kernel, params, steps, arch):
    _, _, base = built(op, kernel, (), arch)
    kf, res, sass = built(op, kernel, (("tensor_core", P(params.items())),), arch)
    (name,) = {lc.kernel for lc in kf.meta.launch}
    assert base[name].features()["tensor_ops"] == 0
    f = sass[name].features()
    # 2 x 2 fragments per warp per step; each 16 x 16 mma is 2 HMMA (16x8 halves)
    # per 16-deep step on sm_80/90, and TF32 m16n16k8 is 2 HMMA.1684 per 8-deep step
    assert f["tensor_ops"] >= 4 * steps * 2, f
    assert res[name].shared_bytes > 0
    no_spills(res, sass)


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize(("op", "kernel", "seq"), [
    ("small_matmul", None, (("matmul_tile", P()),)),
    ("transpose", None, (("smem_tile", P()),)),
    ("sgemm_tf32", "sgemm_2d", (("tensor_core", P(TF32.items())),)),
])
def test_async_copy_makes_the_staging_copies_ldgsts(op, kernel, seq, arch):
    _, _, before = built(op, kernel, seq, arch)
    kf, res, sass = built(op, kernel, (*seq, ("async_copy", P())), arch)
    (name,) = {lc.kernel for lc in kf.meta.launch}
    assert before[name].features()["async_copies"] == 0
    assert sass[name].features()["async_copies"] >= 1
    # the copies no longer pass through a register: fewer shared stores from registers
    assert sass[name].count("STS") < before[name].count("STS") or \
        before[name].count("STS") <= 2
    no_spills(res, sass)


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("kernel", ["dot_atomic", "dot_tree"])
def test_atomic_reduce_shuffles_and_adds_once_per_block(kernel, arch):
    _, _, base = built("ddot", kernel, (), arch)
    _, res, sass = built("ddot", kernel, (("atomic_reduce", P()),), arch)
    f = sass[kernel].features()
    assert f["shuffles"] >= 5 and f["atomics"] == 1, f
    assert base[kernel].features()["atomics"] == 1  # one per thread (or per block), before
    no_spills(res, sass)


@pytest.mark.parametrize("arch", ARCHS)
def test_online_softmax_on_a_block_per_row(arch):
    _, _, two = built("softmax_rows", None, (("block_reduce", P()),), arch)
    _, res, sass = built("softmax_rows", None,
                          (("block_reduce", P()), ("online_softmax", P())), arch)
    f2, f1 = two["softmax_rows"].features(), sass["softmax_rows"].features()
    assert f1["shuffles"] >= 10  # (max, sum) pairs shuffled
    assert f1["global_loads"] < f2["global_loads"]  # the stored exponentials not read back
    assert f1["global_stores"] <= f2["global_stores"]
    no_spills(res, sass)


@pytest.mark.parametrize("arch", ARCHS)
def test_fused_row_pass_then_a_block_per_row(arch):
    _, _, base = built("rmsnorm", "rms_two_pass", (), arch)
    kf, res, sass = built("rmsnorm", "rms_two_pass",
                          (("launch_fusion", P()), ("block_reduce", P())), arch)
    assert len(base) == 2 and len(kf.meta.launch) == 1 and kf.meta.temps == {}
    (f,) = [s.features() for s in sass.values()]
    assert f["shuffles"] >= 5 and f["global_stores"] == 1
    no_spills(res, sass)


@pytest.mark.parametrize("arch", ARCHS)
def test_coarsen_and_launch_bounds(arch):
    kf, res, sass = built("transpose", None, (("coarsen", P()), ("launch_bounds", P())), arch)
    assert "__launch_bounds__(BLOCK)" in kf.body and kf.meta.knobs["COARSEN"] == 4
    # four elements per thread, unrolled: four loads and four stores
    f = sass["transpose"].features()
    assert f["global_loads"] >= 4 and f["global_stores"] >= 4
    no_spills(res, sass)


@pytest.mark.parametrize("arch", ARCHS)
def test_split_reduce_meets_the_partials_in_shared_memory(arch):
    kf, res, sass = built("colsum", "column_max_sum", (("split_reduce", P()),), arch)
    f = sass["col_reduce"].features()
    assert f["shared_stores"] >= 1 and f["shared_loads"] >= 1 and f["barriers"] >= 1
    assert kf.meta.launch[0].block == ["SPLIT_X", "SPLIT_Y"]
    assert res["col_reduce"].shared_bytes == 1024 * 4
    no_spills(res, sass)


@pytest.mark.parametrize("arch", ARCHS)
def test_vector_access_moves_four_halves_as_one_8_byte_access(arch):
    _, _, base = built("haxpb", "haxpb", (), arch)
    _, res, sass = built("haxpb", "haxpb", (("vector_access", P()),), arch)
    wide = {o: n for o, n in sass["haxpb"].ops.items() if ".64" in o and o[:3] in ("LDG", "STG")}
    assert not any(".64" in o for o in base["haxpb"].ops if o[:3] in ("LDG", "STG"))
    assert any(o.startswith("LDG") for o in wide) and any(o.startswith("STG") for o in wide)
    no_spills(res, sass)


@pytest.mark.parametrize("arch", ARCHS)
def test_tensor_core_on_bfloat16_operands(arch, monkeypatch):
    """__nv_bfloat16 operands take the bf16 fragments (HMMA ... BF16). Compiled only:
    an op's inputs have no bfloat16 dtype, so this one is not emulated."""
    t = (EMU / "kernels" / "hgemm_2d.cu").read_text()
    t = t.replace("__half2float", "__bfloat162float").replace(
        "const __half*", "const __nv_bfloat16*").replace("cuda_fp16.h", "cuda_bf16.h")
    new = apply_transform("tensor_core", t, HALF)
    assert new is not None and "wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16" in new
    monkeypatch.setenv("KERNELCREW_CUDA_ARCH", arch)
    res = CudaBackend().compile(parse_kernel_text(new, "cuda"), spec_of("hgemm"))
    assert res.ok, res.reason
    ops = disassemble(res.artifact)["hgemm"].ops
    assert sum(n for o, n in ops.items() if o.startswith("HMMA") and "BF16" in o) >= 8
