"""The CUDA library: a baseline.cu for every operator, written as CUDA code in the wild
is (one thread per element or row, naive indexing, atomicAdd reductions, a kernel per
pass), a hand-written fast.cu beside each (tests/kernels/<op>/), and shape groups sized
for a datacenter GPU (op.yaml `backend_shapes.cuda`).

Without a device, every kernel's launch plan runs under the CPU emulation
(tests/cuda/library_emu.py: which cases are scaled down and why) against the float64
reference on every CUDA shape group, and gcov shows that every line of the kernel ran and
every branch went both ways (launch-plan guards aside)."""

from __future__ import annotations

import pytest

from kernelcrew.kernels.kernelfile import load_kernel, validate_against
from kernelcrew.kernels.spec import library_ops, load_op
from kernelcrew.tools.backends.cuda_runtime import MIN_TIMED_MS, repeats_for
from tests.cuda.library_emu import CUDA_OPS, emulate_kernel, kernel_path

# a datacenter GPU's copy bandwidth (an H200 measured 4.3 TB/s) and what an idle one takes
# to start a timed launch (about 20 us, measured there): a case must outlast the latter
GPU_GBPS = 4300.0
IDLE_LAUNCH_MS = 0.020
COMPUTE_FAMILIES = {"attention", "convolution", "matmul"}


def test_most_library_ops_have_a_cuda_baseline_and_every_one_a_fast_kernel():
    assert len(CUDA_OPS) >= 14, CUDA_OPS
    for op in CUDA_OPS:
        spec = load_op(op)
        assert spec.baselines.get("cuda") == "baseline.cu"
        for which in ("baseline", "fast"):
            kf = load_kernel(kernel_path(op, which))
            validate_against(kf, spec)  # the launch plan's args fit the op
            assert kf.backend == "cuda" and kf.meta.launch


@pytest.mark.parametrize("op", CUDA_OPS)
def test_cuda_shape_groups_are_sized_for_a_datacenter_gpu(op):
    """typical: hundreds of MB per call (compute-bound ops: a GFLOP or more); the CPU's
    typical cases kept as `small`, timed as several launches where one is shorter than
    the harness's timing floor; boundary and unaligned shared with the CPU."""
    cpu, cuda = load_op(op), load_op(op, "cuda")
    assert list(cuda.shapes) == ["typical", "boundary", "unaligned", "small"]
    assert cuda.shapes["small"].cases == cpu.shapes["typical"].cases
    for g in ("boundary", "unaligned"):
        assert cuda.shapes[g] == cpu.shapes[g]
    for case in cuda.shapes["typical"].cases:
        nbytes, flops = cuda.cost_bytes(case), cuda.cost_flops(case)
        if cuda.family in COMPUTE_FAMILIES:
            assert flops >= 1e9 or nbytes >= 1e8, (case, nbytes, flops)
        else:
            assert nbytes >= 1.5e8, (case, nbytes)
        # at the copy bandwidth one launch outlasts an idle GPU's start-up twice over
        assert nbytes / (GPU_GBPS * 1e6) >= 2 * IDLE_LAUNCH_MS or flops >= 1e9
    for case in cuda.shapes["small"].cases:
        est_ms = cuda.cost_bytes(case) / (GPU_GBPS * 1e6)
        if est_ms < MIN_TIMED_MS:  # the runtime times such a plan as several runs
            assert repeats_for(est_ms) >= 2


def test_the_cpu_sees_the_shape_groups_op_yaml_gives_it():
    for op in library_ops():
        spec = load_op(op)
        assert spec.for_backend("cpu") is spec and load_op(op, "cpu").shapes == spec.shapes
        assert list(spec.shapes) == ["typical", "boundary", "unaligned"]
        assert "small" not in spec.shapes


# three ops in the default suite (a grid-stride elementwise kernel, shared-memory atomics
# with dynamic shared memory, 2-D shared-memory tiles; 3-10 s each); the rest in the slow one
QUICK = {"gelu_tanh", "histogram", "transpose"}
EMULATED = [pytest.param(op, which, marks=() if op in QUICK else pytest.mark.slow,
                         id=f"{op}-{which}") for op in CUDA_OPS for which in ("baseline", "fast")]


@pytest.mark.parametrize(("op", "which"), EMULATED)
def test_kernel_is_correct_on_every_cuda_group_and_every_line_runs(op, which, tmp_path):
    spec = load_op(op, "cuda")
    res = emulate_kernel(op, which, tmp_path)
    assert not res.failures, res.failures[:3]
    assert res.groups >= set(spec.shapes), res.groups
    text = kernel_path(op, which).read_text()
    assert res.cov.lines, "gcov saw no line of the kernel file"
    assert not res.unrun_lines(), (f"lines never run: {res.unrun_lines()}", res.cases)
    assert not res.one_way_branches(text), res.one_way_branches(text)
