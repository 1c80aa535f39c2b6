"""The transformations on every library baseline: the result compiles (g++, nvcc) and stays
correct through the real harness (`check`, on the op cut down to small shapes)."""

from __future__ import annotations

import shutil

import pytest

from kernelcrew.agents.proposal import Change
from kernelcrew.agents.transforms import apply_change, apply_transform, parse_any
from kernelcrew.kernels.kernelfile import parse_kernel_text
from kernelcrew.kernels.spec import load_op
from kernelcrew.tools.check import check
from kernelcrew.tools.cpu import CpuBackend
from tests.agents.conftest import OPS, QUICK, baseline_text

# which transformations apply to which baseline (None: must not apply)
APPLIES = {
    "fusion": {"add_gelu_muladd"},
    "interchange": {"small_matmul"},
    "tile": {"transpose"},
    "simd": set(OPS) - {"transpose"},  # transpose's strided store is not vectorized
    "vector_math": {"add_gelu_muladd", "softmax_rows"},
}
STACK = [("flags", {"add": ["-O3", "-march=native"]}), ("restrict", {}), ("vector_math", {}),
         ("fusion", {}),
         ("interchange", {}), ("tile", {}), ("omp_parallel", {}), ("unroll", {"factor": 4}),
         ("simd", {})]


def checked(small_ops, tmp_path, op: str, text: str, name: str):
    path = tmp_path / f"{op}-{name}.cpp"
    path.write_text(text)
    return check(str(small_ops(op)), str(path), "cpu", bench=QUICK)


@pytest.mark.parametrize("op", OPS)
def test_each_transform_compiles_on_the_baseline(op):
    spec = load_op(op)
    be = CpuBackend()
    base = baseline_text(op)
    for name, params in STACK:
        out = apply_transform(name, base, params)
        expected = APPLIES.get(name)
        if expected is not None and op not in expected:
            assert out is None, f"{name} must not apply to {op}"
            continue
        assert out is not None, f"{name} should apply to {op}"
        kf = parse_kernel_text(out, "cpu")
        if "#pragma omp parallel" in kf.body or "#pragma omp for" in kf.body:
            assert "-fopenmp" in kf.meta.flags
        comp = be.compile(kf, spec)
        assert comp.ok, f"{name} on {op}: {comp.reason}\n{comp.log[-2000:]}"


@pytest.mark.parametrize("op", OPS)
def test_stacked_transforms_stay_correct(op, small_ops, tmp_path):
    text = baseline_text(op)
    applied = []
    for name, params in STACK:
        new = apply_transform(name, text, params)
        if new is not None:
            text, applied = new, applied + [name]
    assert {"flags", "restrict", "omp_parallel", "simd"} <= set(applied)  # simd: after tile
    res = checked(small_ops, tmp_path, op, text, "stacked")
    assert res.correct, f"{op} after {applied}: {res.reason}"


@pytest.mark.parametrize("op, name", [(op, "omp_parallel") for op in OPS]
                         + [(op, "simd") for op in OPS]
                         + [("add_gelu_muladd", "fusion"), ("small_matmul", "interchange"),
                            ("transpose", "tile"), ("add_gelu_muladd", "vector_math"),
                            ("softmax_rows", "vector_math")])
def test_single_transform_stays_correct(op, name, small_ops, tmp_path):
    base = baseline_text(op)
    if (op, name) == ("transpose", "simd"):
        base = apply_transform("tile", base)  # the baseline's store is strided
    text = apply_transform(name, base, {})
    assert text is not None
    res = checked(small_ops, tmp_path, op, text, name)
    assert res.correct, f"{name} on {op}: {res.reason}"


def test_apply_change_replays_a_change_on_another_base(small_ops, tmp_path):
    """The coordinator's merge: a simd change made on the baseline, re-applied on top of the
    fused + threaded kernel, touches the new loops and stays correct."""
    op = "add_gelu_muladd"
    base = baseline_text(op)
    simd_text = apply_transform("simd", base)
    change = Change(type="source", kind="simd", kernel=simd_text, transform="simd")
    other = apply_transform("omp_parallel", apply_transform("fusion", base))
    merged = apply_change(change, other)
    assert merged is not None and merged != other
    kf = parse_any(merged)
    assert kf.body.count("#pragma omp simd") == 2  # threaded and serial copies of the pass
    assert "-fopenmp" in kf.meta.flags
    assert checked(small_ops, tmp_path, op, merged, "merged").correct
    # flags and knob changes without a transform replay from the recorded values
    flags = Change(type="flags", kind="flags", kernel="", flags=["-O3", "-march=native"])
    replayed = parse_any(apply_change(flags, merged))
    assert replayed.meta.flags[:2] == ["-O3", "-march=native"] and "-fopenmp" in \
        replayed.meta.flags
    assert apply_change(Change(type="source", kind="rewrite", kernel=""), merged) is None


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc (compile only)")
@pytest.mark.parametrize("op", OPS)
def test_cuda_transforms_compile_with_sane_registers(op):
    from kernelcrew.tools.cuda import CudaBackend

    spec = load_op(op)
    be = CudaBackend()
    text = baseline_text(op, "cuda")
    base = be.compile(parse_kernel_text(text, "cuda"), spec)
    assert base.ok, base.reason
    base_regs = {r.kernel: r.registers for r in base.resources}
    steps = [("ldg", {}), ("launch_bounds", {}), ("grid_stride", {}), ("unroll", {"factor": 4}),
             ("knobs", {"values": {"BLOCK": 128}}), ("flags", {"add": ["-maxrregcount=64"]})]
    applied = []
    for name, params in steps:
        new = apply_transform(name, text, params)
        assert new is not None, f"{name} should apply to {op}.cu"
        text, applied = new, applied + [name]
    kf = parse_kernel_text(text, "cuda")
    assert all("GRID_CAP" in str(lc.grid[0]) for lc in kf.meta.launch)
    assert "__ldg(" in kf.body and "__launch_bounds__(BLOCK)" in kf.body
    res = be.compile(kf, spec)
    assert res.ok, f"{op}.cu after {applied}: {res.reason}\n{res.log[-1500:]}"
    for r in res.resources:
        assert r.registers is not None and r.registers <= 64, (r.kernel, r.registers)
        assert (r.spill_stores_bytes or 0) == 0
        assert r.registers <= 2 * base_regs[r.kernel] + 16
