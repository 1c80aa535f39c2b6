"""Every library baseline passes its own shape groups on the CPU, and each hand-written
fast kernel under tests/kernels/ is judged correct and faster: the harness sees wins.

Two of the six first operators (a compute-bound and a strided one) are raced in the quick
suite, the other four in the slow one (6-20 s each at their full sizes); for the rest,
baseline and fast kernel are verified on the boundary and unaligned groups in the quick
suite (no timing, the small cases) and checked on every group and raced in the slow one.
"""

from __future__ import annotations

import pytest

from kernelcrew.kernels.kernelfile import load_kernel, validate_against
from kernelcrew.kernels.spec import library_ops, load_op
from kernelcrew.tools.backends.backend import get_backend
from kernelcrew.tools.config import BenchSettings
from kernelcrew.tools.judge.check import check
from kernelcrew.tools.judge.harness import Harness
from tests.conftest import ROOT

OPS = library_ops()
FIRST_SIX = ("scale_shift_sum", "small_matmul", "add_gelu_muladd", "softmax_rows", "rmsnorm",
             "transpose")
RACED_QUICK = ("small_matmul", "transpose")
RACED = [pytest.param(op, marks=() if op in RACED_QUICK else pytest.mark.slow)
         for op in FIRST_SIX]
VERIFIED_QUICK = [op for op in OPS if op not in FIRST_SIX]
BENCH = BenchSettings(reps=10)


def check_faster(op: str, path):
    """`check` on the kernel; where it measured a gain that the machine's noise covered
    (`same` at a speedup past the minimum), once more with three times the rounds, as a
    performance engineer measures longer on a noisy machine. The verdict stays the judge's."""
    res = check(op, path, "cpu", bench=BENCH)
    if res.verdict == "same" and res.speedup >= 1 + BENCH.min_speedup:
        longer = BenchSettings(reps=BENCH.reps, rounds=3 * BENCH.rounds)
        res = check(op, path, "cpu", bench=longer)
    return res


def test_library_has_families_beyond_the_first_six():
    families = {load_op(op).family for op in OPS}
    assert len(OPS) >= 18 and len(families) >= 10, sorted(families)
    dtypes = {t.dtype for op in OPS for t in load_op(op).inputs.values()}
    assert {"float32", "float64", "int32"} <= dtypes


@pytest.mark.parametrize("op", OPS)
def test_every_library_op_has_a_hand_written_fast_kernel(op):
    spec = load_op(op)
    fast = load_kernel(ROOT / "tests/kernels" / op / "fast.cpp")
    validate_against(fast, spec)  # the entry and its signature fit the op
    assert fast.meta.entry == load_kernel(spec.baseline_path("cpu")).meta.entry


@pytest.mark.parametrize("op", RACED)
def test_library_baseline_is_correct_on_every_group(op):
    res = check(op, ROOT / "kernelcrew/kernels/library" / op / "baseline.cpp", "cpu",
                bench=BENCH)
    assert res.correct, res.reason
    assert {r.group for r in res.rows} == {"typical", "boundary", "unaligned"}
    assert all(r.status == "pass" for r in res.rows)
    assert res.verdict != "rejected"


@pytest.mark.parametrize("op", RACED)
def test_hand_written_fast_kernel_is_correct_and_faster(op):
    res = check_faster(op, ROOT / "tests/kernels" / op / "fast.cpp")
    assert res.correct, res.reason
    assert res.verdict == "faster", f"{res.speedup:.2f}x: {res.reason}"


@pytest.mark.parametrize("op", VERIFIED_QUICK)
def test_baseline_and_fast_kernel_are_correct_on_the_edge_groups(op):
    spec = load_op(op)
    be = get_backend("cpu")
    edges = [c for c in spec.cases() if c.group != "typical"]
    with Harness(spec, be, seed=0, cases=edges) as h:
        for path in (spec.baseline_path("cpu"), ROOT / "tests/kernels" / op / "fast.cpp"):
            kf = load_kernel(path)
            comp = be.compile(kf, spec)
            assert comp.ok, f"{path}: {comp.reason}\n{comp.log[-2000:]}"
            run = h.run(comp, kf, mode="verify", reps=0)
            assert run.correct, f"{path}: {run.first_failure()}"
            assert {r.group for r in run.rows} == {"boundary", "unaligned"}


@pytest.mark.slow
@pytest.mark.parametrize("op", VERIFIED_QUICK)
def test_hand_written_fast_kernel_of_a_newer_op_is_correct_and_faster(op):
    res = check_faster(op, ROOT / "tests/kernels" / op / "fast.cpp")
    assert res.correct, res.reason  # the baseline too: check raises when it fails
    assert {r.group for r in res.rows} == {"typical", "boundary", "unaligned"}
    assert res.verdict == "faster", f"{res.speedup:.2f}x: {res.reason}"
