"""The transformations on every library baseline: the result compiles (g++, nvcc) and stays
correct through the real harness (`check`, on the op cut down to small shapes)."""

from __future__ import annotations

import re
import shutil

import pytest
import yaml

from kernelcrew.agents.proposal import Change
from kernelcrew.agents.transforms import apply_change, apply_transform, parse_any
from kernelcrew.csource.syntax import (
    Source,
    all_loops,
    functions,
    loops_in,
    pragma_text,
    pragmas_before,
    walk,
)
from kernelcrew.kernels.kernelfile import parse_kernel_text
from kernelcrew.kernels.spec import load_op
from kernelcrew.tools.backends.cpu import CpuBackend
from kernelcrew.tools.backends.cuda import nvcc_path
from kernelcrew.tools.judge.check import check
from tests.agents.conftest import OPS, QUICK, baseline_text

# which transformations apply to which baseline (None: must not apply)
APPLIES = {
    "fusion": {"add_gelu_muladd"},
    "interchange": {"small_matmul"},
    "register_block": set(),  # only on an interchanged (i-k-j) nest, no baseline has one
    "tile": {"transpose"},
    "simd": set(OPS) - {"transpose"},  # transpose's strided store is not vectorized
    "vector_math": {"add_gelu_muladd", "softmax_rows"},
}
STACK = [("flags", {"add": ["-O3", "-march=native"]}), ("restrict", {}), ("vector_math", {}),
         ("fusion", {}),
         ("interchange", {}), ("tile", {}), ("omp_parallel", {}), ("register_block", {}),
         ("unroll", {"factor": 4}),
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


# shapes the register blocking has to get right besides the small op's: m < RB with n < JB,
# m % RB != 0 with n % JB == JB - 1, n at the vector width (only leftover columns), k = 1
BLOCKING_CASES = {"boundary": [{"batch": 2, "m": 3, "k": 4, "n": 9}],
                  "unaligned": [{"batch": 5, "m": 6, "k": 3, "n": 47},
                                {"batch": 3, "m": 4, "k": 1, "n": 8}]}


@pytest.mark.slow  # every group of a matmul, checked twice: about 13 s
def test_register_block_on_the_interchanged_matmul_is_correct_on_every_group(small_ops,
                                                                              tmp_path):
    folder = tmp_path / "small_matmul"
    shutil.copytree(small_ops("small_matmul"), folder)
    data = yaml.safe_load((folder / "op.yaml").read_text())
    for group, cases in BLOCKING_CASES.items():
        data["shapes"][group]["cases"] += cases
    (folder / "op.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    base = baseline_text("small_matmul")
    ikj = apply_transform("simd", apply_transform("interchange", base))
    threaded = apply_transform("omp_parallel", apply_transform("restrict", ikj),
                               {"min_work": 30000})
    assert apply_transform("register_block", base) is None  # i-j-k: interchange first
    variants = {"serial": apply_transform("register_block", ikj),
                "threaded": apply_transform("register_block", threaded)}
    variants["rb3-jb8"] = apply_transform("knobs", variants["threaded"],
                                          {"values": {"RB": 3, "JB": 8}})
    variants["fast"] = apply_transform("flags", variants["threaded"],
                                       {"add": ["-O3", "-march=native"]})
    for name, text in variants.items():
        assert text is not None, name
        kf = parse_kernel_text(text, "cpu")
        copies = 2 if name != "serial" else 1  # the threaded and the serial copy
        assert kf.body.count("+= RB)") == copies and kf.body.count("[RB][JB];") == copies
        assert kf.meta.knobs["RB"] == (3 if name == "rb3-jb8" else 4)
        assert "-fopenmp" in kf.meta.flags or "-fopenmp-simd" in kf.meta.flags
        path = tmp_path / f"small_matmul-rb-{name}.cpp"
        path.write_text(text)
        res = check(str(folder), str(path), "cpu", bench=QUICK)
        assert res.correct, f"register_block ({name}): {res.reason}"


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


def loop_pragmas(text: str) -> list[list[str]]:
    """The pragmas attached to each loop of a kernel file, loops in source order. Asserts
    that no other pragma is left (one in front of anything but its loop does not compile),
    the `omp parallel` that opens a region apart."""
    s = Source(parse_any(text).body)
    loops = [lp for fn in functions(s) for lp in all_loops(loops_in(fn))]
    on_loops = [pragmas_before(lp.node) for lp in loops]
    attached = {p.start_byte for ps in on_loops for p in ps}
    stray = [s.text_of(n) for n in walk(s.root) if n.type == "preproc_call"
             and n.start_byte not in attached and pragma_text(s, n) != "omp parallel"]
    assert not stray, text
    return [[pragma_text(s, p) for p in ps] for ps in on_loops]


# library kernels: simd on the inner loops, omp_parallel on the outer one (the versioned
# nest copies them); vadd and axpy (tests/ops): one loop, so the loop that omp_parallel
# versions is the very loop that simd annotates
@pytest.mark.parametrize("op", ["scale_shift_sum", "softmax_rows", "vadd", "axpy"])
def test_simd_and_omp_parallel_compose_in_either_order(op, small_ops, op_copy, tmp_path):
    """The pragmas of a loop move with it when omp_parallel versions it: `omp simd` is on
    the loop in the serial copy and part of the worksharing pragma in the threaded one,
    whichever of the two changes came first. The threshold is low enough that the typical
    case runs the threaded copy and the smaller ones the serial copy."""
    folder = small_ops(op) if op in OPS else op_copy(op)
    spec = load_op(folder)
    base = (folder / "baseline.cpp").read_text()
    par = {"min_work": 150000}
    simd_only = loop_pragmas(apply_transform("simd", base))
    vectorized = sum(any(re.match(r"omp simd\b", p) for p in ps) for ps in simd_only)
    assert vectorized >= 1
    outs = []
    for first, then in ((("simd", {}), ("omp_parallel", par)),
                        (("omp_parallel", par), ("simd", {}))):
        one = apply_transform(first[0], base, first[1])
        assert one is not None, f"{first[0]} should apply to {op}"
        two = apply_transform(then[0], one, then[1])
        assert two is not None, f"{then[0]} should apply to {op} after {first[0]}"
        kf = parse_kernel_text(two, "cpu")
        comp = CpuBackend().compile(kf, spec)
        assert comp.ok, f"{first[0]}, {then[0]} on {op}: {comp.reason}\n{comp.log[-2000:]}"
        assert "-fopenmp" in kf.meta.flags and kf.meta.knobs["OMP_MIN_WORK"] == 150000
        prags = loop_pragmas(two)
        threaded = [ps for ps in prags if any(p.startswith("omp parallel for") for p in ps)]
        assert len(threaded) == 1, prags  # one loop threaded, its serial copy is not
        # every loop simd annotated, in both copies: the threaded one with the combined
        # construct when it is the threaded loop itself
        assert sum(any(re.match(r"omp (parallel for )?simd\b", p) for p in ps)
                   for ps in prags) == 2 * vectorized, prags
        assert all(len(ps) == 1 for ps in prags if ps), prags  # g++ takes one per loop
        outs.append((two, prags))
    assert outs[0][1] == outs[1][1]  # the same pragmas on the same loops either way
    path = tmp_path / f"{op}-simd-omp.cpp"
    path.write_text(outs[0][0])
    res = check(str(folder), str(path), "cpu", bench=QUICK)
    assert res.correct, f"simd + omp_parallel on {op}: {res.reason}"


@pytest.mark.skipif(nvcc_path() is None, reason="needs nvcc (compile only)")
@pytest.mark.parametrize("op", OPS)
def test_cuda_transforms_compile_with_sane_registers(op):
    from kernelcrew.tools.backends.cuda import CudaBackend

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
