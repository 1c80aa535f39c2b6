"""The rule-based CUDA specialists reach for the moves a GPU performance engineer would,
where they apply, with the evidence they rest on: product kernels tiled (the tensor cores
only with the op's tolerance), atomics reduced, column reductions split, a softmax in one
pass, tile and register rungs from ptxas. No compiler needed: proposals are rewrites."""

from __future__ import annotations

from pathlib import Path

from kernelcrew.agents.context import AgentContext
from kernelcrew.agents.heuristic.cuda_moves import tolerance
from kernelcrew.agents.specialist import get_specialist
from kernelcrew.agents.transforms import apply_change, apply_transform, parse_any
from kernelcrew.kernels.spec import load_op
from kernelcrew.results import Diagnosis, Metric, ProfileResult

EMU = Path(__file__).parent / "emu"


def ctx_for(text: str, op: str = "test", tol: str = "rtol=0.0001, atol=0.0001",
            profile: ProfileResult | None = None) -> AgentContext:
    return AgentContext(op=op, family="test", description=op, backend="cuda", signature="",
                        tolerance=tol, kernel=text, profile=profile)


def proposals(ctx: AgentContext, who: str = "memory_access"):
    props = get_specialist(who).propose(ctx)
    for p in props:  # every proposal replays on its base (the coordinator merges so)
        assert apply_change(p.change, ctx.kernel) == p.change.kernel
    return props


def kernel(name: str) -> str:
    return (EMU / "kernels" / f"{name}.cu").read_text()


def test_the_tolerance_line_is_read():
    assert tolerance(ctx_for("", tol="rtol=1e-3, atol=0.002")) == (1e-3, 2e-3)
    assert tolerance(ctx_for("", tol="")) == (-1.0, -1.0)


def test_a_product_kernel_is_tiled_first():
    props = proposals(ctx_for(load_op("small_matmul").baseline_path("cuda").read_text()))
    kinds = [p.change.kind for p in props]
    assert kinds[0] == "matmul_tile"
    assert "async_copy" in kinds
    # TF32 is not proposed: small_matmul asks for rtol 1e-4
    assert not any(k.startswith("tensor_core") for k in kinds)
    tiles = {p.change.knobs["TILE_M"] for p in props if p.change.kind == "matmul_tile"}
    assert tiles == {64, 32}  # the 32 x 32 rung for small matrices too


def test_tensor_cores_where_the_op_allows():
    h = proposals(ctx_for(kernel("hgemm_2d"), tol="rtol=0.001, atol=0.001"))
    assert h[0].change.kind == "tensor_core" and "wmma::mma_sync" in h[0].change.kernel
    loose = proposals(ctx_for(kernel("sgemm_2d"), tol="rtol=0.01, atol=0.01"))
    assert "tensor_core:tf32" in {p.change.kind for p in loose}


def test_reductions_take_the_move_that_fits_their_access():
    dot = proposals(ctx_for(kernel("dot_tree")))
    assert dot[0].change.kind == "atomic_reduce"  # not block_reduce's tree reshaping alone
    col = proposals(ctx_for(kernel("column_max_sum")))
    assert col[0].change.kind == "split_reduce" and "stride" in col[0].bottleneck
    row = proposals(ctx_for(load_op("rmsnorm").baseline_path("cuda").read_text()))
    assert row[0].change.kind == "block_reduce"
    soft = proposals(ctx_for(load_op("softmax_rows").baseline_path("cuda").read_text()))
    first = soft[0]
    assert first.change.kind == "online_softmax" and \
        "kc_block_online_softmax" in first.change.kernel


def test_tile_rungs_and_coarsening_from_the_loop_specialist():
    tiled = apply_transform("matmul_tile", load_op("small_matmul").baseline_path("cuda")
                            .read_text())
    props = proposals(ctx_for(tiled), "loop")
    sizes = [p.change.knobs for p in props if p.change.kind == "matmul_tile:size"]
    assert {"TILE_M": 32, "TILE_N": 32, "REG_M": 2, "REG_N": 2} in sizes
    assert {"TILE_M": 128, "TILE_N": 128, "REG_M": 8, "REG_N": 8} in sizes
    for k in sizes:  # every rung keeps REG dividing TILE
        assert k["TILE_M"] % k["REG_M"] == 0
    elem = proposals(ctx_for(load_op("transpose").baseline_path("cuda").read_text()), "loop")
    assert "coarsen" in {p.change.kind for p in elem}


def test_spills_in_a_register_tile_halve_it():
    tiled = apply_transform("matmul_tile", load_op("small_matmul").baseline_path("cuda")
                            .read_text(), {"tile_m": 128, "tile_n": 128, "reg_m": 8,
                                           "reg_n": 8})
    m = {"registers_per_thread": Metric(value=255, unit="registers"),
         "theoretical_occupancy_pct": Metric(value=12.5, unit="%"),
         "spill_stores_bytes": Metric(value=96, unit="bytes")}
    prof = ProfileResult(op="small_matmul", kernel="k.cu", backend="cuda", case="typical[0]",
                         source="compile-only", summary="...", metrics=m,
                         bottleneck=Diagnosis(kind="compute-bound", evidence="inferred",
                                              measured=False))
    props = proposals(ctx_for(tiled, profile=prof), "compiler_flags")
    reg = next(p for p in props if p.change.kind == "register_pressure")
    assert reg.change.knobs == {"REG_M": 4, "REG_N": 4}
    assert "spills 96 bytes" in reg.bottleneck
    bounds = next(p for p in props if p.change.kind == "launch_bounds")
    assert "__launch_bounds__((TILE_N / REG_N) * (TILE_M / REG_M))" in bounds.change.kernel
    assert parse_any(bounds.change.kernel).meta.knobs["REG_M"] == 8
    assert "12% theoretical occupancy" in bounds.bottleneck
    # measured occupancy, where ncu gave one, is what the choice cites
    prof.metrics["achieved_occupancy_pct"] = Metric(value=9.5, unit="%")
    props = proposals(ctx_for(tiled, profile=prof), "compiler_flags")
    bounds = next(p for p in props if p.change.kind == "launch_bounds")
    assert "10% achieved (ncu) occupancy" in bounds.bottleneck
