"""The register-pressure choices of case 4.2, ranked without a device: a register-heavy
kernel (64 accumulators per thread, 128 registers at BLOCK=256, 25% theoretical
occupancy) gets its three ways out compiled by the real nvcc/ptxas — smaller blocks,
__launch_bounds__(BLOCK, MIN_BLOCKS), -maxrregcount — and ranked by spills, then the
occupancy table, then registers; the compile-only profile carries the winner and the
compiler_flags specialist proposes exactly that change. Given measurements (ncu or
timings on a device), the fastest choice wins instead."""

from __future__ import annotations

import pytest

from kernelcrew.agents.context import AgentContext
from kernelcrew.agents.heuristic.compiler_flags import CompilerFlags
from kernelcrew.kernels.kernelfile import load_kernel
from kernelcrew.kernels.spec import load_op
from kernelcrew.tools.backends.cuda import CudaBackend, nvcc_path
from kernelcrew.tools.backends.occupancy import (
    RegisterChoice,
    rank_register_choices,
    register_limit_for,
    theoretical_occupancy,
)
from kernelcrew.tools.observe.profile import profile
from kernelcrew.tools.observe.regpressure import register_choices
from tests.cuda.helpers import FIXTURES

WIDE = FIXTURES / "regs" / "wide_rows.cu"
needs_nvcc = pytest.mark.skipif(nvcc_path() is None, reason="nvcc not found")


def test_launch_bounds_register_limit_matches_the_occupancy_table():
    for block, blocks in ((256, 2), (256, 3), (128, 4), (1024, 1)):
        cap = register_limit_for("sm_90", block, blocks)
        occ = theoretical_occupancy("sm_90", block_threads=block, registers_per_thread=cap)
        assert occ.blocks_per_sm >= blocks, (block, blocks, cap, occ)
        over = theoretical_occupancy("sm_90", block_threads=block,
                                     registers_per_thread=cap + 8)
        assert over.limits["registers"] < blocks or cap >= 255


def test_ranking_prefers_no_spills_then_occupancy_and_measurements_when_given():
    a = RegisterChoice("smaller blocks (128)", "block", 128, 128, 0, 128)
    b = RegisterChoice("__launch_bounds__(256, 3)", "launch_bounds", 3, 80, 0, 256)
    c = RegisterChoice("-maxrregcount=64", "maxrregcount", 64, 64, 96, 256)
    ranked = [x[0].how for x in rank_register_choices("sm_90", [a, b, c])]
    assert ranked == ["launch_bounds", "block", "maxrregcount"]  # c spills: last
    timed = [x.__class__(**{**x.__dict__, "measured_ms": t}) for x, t in
             ((a, 0.9), (b, 1.2), (c, 0.7))]
    assert [x[0].how for x in rank_register_choices("sm_90", timed)] == \
        ["maxrregcount", "block", "launch_bounds"]


@needs_nvcc
def test_the_three_choices_are_compiled_and_ranked_by_ptxas():
    spec = load_op("small_matmul")
    kf = load_kernel(WIDE)
    be = CudaBackend()
    comp = be.compile(kf, spec)
    assert comp.ok, comp.reason
    (r,) = comp.resources
    assert r.registers >= 100
    base_occ = theoretical_occupancy(be.target_arch(), block_threads=256,
                                     registers_per_thread=r.registers)
    assert base_occ.limiter == "registers" and base_occ.occupancy < 0.5
    ranked = register_choices(spec, kf, be, "small_matmul", 256, 0, r.registers)
    assert {c.how for c, _, _ in ranked} == {"block", "launch_bounds", "maxrregcount"}
    for c, occ, why in ranked:
        assert str(c.registers) in why and f"{occ:.0%}" in why
    # the order is the stated rule applied to what ptxas reported
    keys = [(c.spill_bytes > 0, -occ, c.registers) for c, occ, _ in ranked]
    assert keys == sorted(keys)
    best, occ, _ = ranked[0]
    assert best.spill_bytes == 0 and occ > base_occ.occupancy


@needs_nvcc
@pytest.mark.skipif(CudaBackend().can_run()[0], reason="a device is present")
def test_the_profile_carries_the_winner_and_the_specialist_proposes_it(tmp_path):
    spec = load_op("small_matmul")
    prof = profile(spec, WIDE, "cuda")
    m = prof.metrics["register_choice"]
    assert m.value is not None and "ranked:" in m.reason
    ctx = AgentContext(op="small_matmul", family="matmul", description="", backend="cuda",
                       signature="", tolerance="", kernel=WIDE.read_text(), profile=prof)
    props = [p for p in CompilerFlags().propose(ctx) if p.change.kind == "register_pressure"]
    assert len(props) == 1
    chosen = prof.metrics["register_choice_value"]
    kernel = props[0].change.kernel
    how = int(m.value)
    if how == 0:
        assert f"BLOCK: {int(chosen.value)}" in kernel
    elif how == 1:
        assert f"__launch_bounds__(BLOCK, {int(chosen.value)})" in kernel
    else:
        assert f"-maxrregcount={int(chosen.value)}" in kernel
