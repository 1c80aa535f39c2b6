"""The CUDA moves the rule-based specialists reach for, and the evidence each one cites.

Every move here is proposed only where its own legality check passes (the base class
drops a move whose transformation does not apply), so the list is the engineer's order
of preference, not a claim that each applies: the product kernels are tiled (shared
memory and registers, or the tensor cores where the op's tolerance allows), atomics and
per-row loops become warp and block reductions, a softmax's passes one pass, launches one
launch; then vector width, coarsening, asynchronous copies and the launch shape; then
the occupancy and register choices that ptxas and the occupancy table (ncu's achieved
occupancy when there is one) point to.
"""

from __future__ import annotations

import re

from kernelcrew.agents.context import AgentContext
from kernelcrew.agents.heuristic.base import Move
from kernelcrew.agents.heuristic.evidence import Evidence

# the tile shapes a matmul_tile kernel is tried with: (TILE_M = TILE_N, REG_M = REG_N)
TILE_LADDER = ((32, 2), (64, 4), (128, 8))


def tolerance(ctx: AgentContext) -> tuple[float, float]:
    """(rtol, atol) from the context's tolerance line; -1 where it does not say."""
    def num(key: str) -> float:
        m = re.search(rf"\b{key}\s*=\s*([-+0-9.eE]+)", ctx.tolerance or "")
        try:
            return float(m.group(1)) if m else -1.0
        except ValueError:
            return -1.0
    return num("rtol"), num("atol")


def _regs(ev: Evidence) -> str:
    bits = []
    if ev.registers is not None:
        bits.append(f"{ev.registers:.0f} registers/thread")
    if ev.occupancy_pct is not None:
        bits.append(f"{ev.occupancy_pct:.0f}% occupancy")
    return f" (now {', '.join(bits)})" if bits else ""


def product_moves(ev: Evidence, ctx: AgentContext) -> list[Move]:
    """Tiling of one-output-per-thread product kernels: shared memory and registers; the
    tensor cores where the numbers allow; both with asynchronous staging copies."""
    rtol, atol = tolerance(ctx)
    out = [Move(
        "matmul_tile", "matmul_tile", 4.0, 0.75,
        why="Each thread computes one output from a row of A and a column of B read straight "
            "from global memory: every element of A and B is loaded once per output that "
            "uses it, and the loop does one FMA per two loads.",
        plan="Tile the outputs: a block computes a 64 x 64 tile, staging 16-deep slices of A "
             "and B through shared memory (coalesced copies, zero-padded at the edges), and "
             "each thread keeps 4 x 4 outputs in registers, reading its operands from shared "
             "memory as float4 (8 FMAs per shared load); TILE_M/TILE_N/TILE_K/REG_M/REG_N "
             "are knobs.",
        risks="small matrices leave most of a 64 x 64 tile idle (the 32 x 32 rung covers "
              "them); more registers per thread")]
    out.append(Move(
        "matmul_tile", "matmul_tile", 3.5, 0.7,
        params={"tile_m": 32, "tile_n": 32, "tile_k": 16, "reg_m": 2, "reg_n": 2},
        why="The same product kernel, for outputs too small to fill a 64 x 64 tile.",
        plan="Tile with 32 x 32 outputs per block and 2 x 2 per thread (256 threads).",
        risks="less reuse per loaded element than the 64 x 64 tile on large matrices"))
    out.append(Move(
        "tensor_core", "tensor_core", 6.0, 0.7,
        params={"rtol": rtol, "atol": atol, "tf32": 0},
        why="A product of 16-bit floats summed in float: the tensor cores do it exactly "
            "(each product is exact in fp32) at many times the FMA units' rate.",
        plan="Compute 64 x 64 output tiles with four warps of wmma 16 x 16 x 16 fragments "
             "(fp32 accumulators), the operands staged 32 deep through shared memory, the "
             "kernel's own epilogue per output.",
        risks="needs sm_70+ (bf16: sm_80+); edge tiles are padded with zeros"))
    out.append(Move(
        "tensor_core", "tensor_core:tf32", 4.0, 0.45,
        params={"rtol": rtol, "atol": atol, "tf32": 1},
        why=f"A float product whose tolerance (rtol {rtol:g}, atol {atol:g}) admits TF32 "
            "operands (10 mantissa bits): the tensor cores' TF32 rate is several times the "
            "FP32 FMA rate.",
        plan="Compute 64 x 64 output tiles with four warps of wmma 16 x 16 x 8 TF32 fragments "
             "(operands rounded to TF32, fp32 accumulators).",
        risks="TF32 rounding: each operand off by up to 2^-11 of itself; sm_80+"))
    out.append(Move(
        "matmul_tile", "async_copy", 4.2, 0.6, params={"then": [["async_copy", {}]]},
        why="The tiled product's staging copies go global -> register -> shared memory.",
        plan="Tile as matmul_tile does, with the staging copies as cp.async "
             "(__pipeline_memcpy_async: LDGSTS on sm_80+), completed before the barrier "
             "that publishes each slice: no register round trip, fewer registers.",
        risks="without double buffering the copies are not overlapped with the FMAs"))
    out.append(Move(
        "async_copy", "async_copy", 1.1, 0.5,
        why="The kernel copies global elements into shared memory through registers.",
        plan="Make those copies cp.async (__pipeline_memcpy_async), waited for just before "
             "the barrier that publishes the shared array.",
        risks="sm_80+ only does them asynchronously (older archs copy as before)"))
    return out


def reduction_moves(ev: Evidence) -> list[Move]:
    """Atomics and per-row loops as warp/block reductions; a softmax's passes as one."""
    mem = ev.kind in (None, "memory-bound", "latency-bound")
    where = ev.facts.strided[0] if ev.facts.strided else ""
    return [
        Move("split_reduce", "split_reduce", 3.0 if where else 1.3, 0.7 if where else 0.4,
             why=(f"Each thread reduces a long loop that walks memory with a stride ({where})"
                  ": neighbouring threads read neighbouring addresses already, but there are "
                  "only as many threads as outputs, each with a long serial loop."
                  if where else "Each output's reduction runs on one thread."),
             plan="Blocks of 32 x 8 threads: the loop split over the 8 y threads (each step "
                  "still coalesced across x), the partials combined in shared memory.",
             risks="short loops gain nothing; 8 x the threads per output"),
        Move("atomic_reduce", "atomic_reduce", 3.0, 0.7,
             why="Every element (or every block of the full grid) adds to one address with "
                 "atomicAdd: the atomics on that address serialize in L2.",
             plan="Sum in a register per thread over a grid-stride loop, combine the block "
                  "with warp shuffles and one shared-memory stage, and add once per block "
                  "(the grid capped by GRID_CAP).",
             risks="the sum's grouping changes (atomics were unordered already)"),
        Move("block_reduce", "online_softmax", 4.5 if mem else 2.2, 0.7,
             params={"then": [["online_softmax", {}]]},
             why="A softmax row is walked three times by one thread: max, exp-and-sum "
                 "(storing the exponentials), divide (reading them back).",
             plan="Give each row a block (coalesced, warp-shuffle reductions), and fuse the "
                  "max and sum passes into one online pass ((max, sum) pairs merged over the "
                  "block), recomputing the exponential in the last pass: two reads of the "
                  "row and one write instead of three reads and two writes.",
             risks="one more exp per element"),
        Move("online_softmax", "online_softmax", 1.4, 0.6,
             why="The softmax reads its row once for the maximum and again for the sum.",
             plan="One pass for both (the sum rescaled when the maximum grows); the "
                  "exponentials recomputed instead of stored and read back.",
             risks="one more exp per element"),
    ]


def launch_moves(ev: Evidence, ctx: AgentContext) -> list[Move]:
    """The loop specialist's CUDA moves besides grid-stride loops and launch bounds:
    thread coarsening, and the tile and coarsening knobs a rung at a time."""
    out = [Move(
        "coarsen", "coarsen", 1.15, 0.4,
        why="One element per thread: each thread issues a single load and exits, so few "
            "bytes are in flight per thread and the index math is paid per element.",
        plan="COARSEN=4 elements per thread a block apart (coalesced), in an unrolled loop "
             "so their loads overlap; the grid divided by COARSEN.",
        risks="fewer threads for small sizes")]
    knobs = ev.knobs
    if all(k in knobs for k in ("TILE_M", "TILE_N", "REG_M", "REG_N")):
        now = (int(knobs["TILE_M"]), int(knobs["REG_M"]))
        for rank, (tile, reg) in enumerate(t for t in TILE_LADDER if t != now):
            if int(knobs["TILE_M"]) != int(knobs["TILE_N"]):
                break
            out.append(Move(
                "knobs", "matmul_tile:size", 1.1, 0.4 - 0.05 * rank, type="knobs",
                params={"values": {"TILE_M": tile, "TILE_N": tile, "REG_M": reg,
                                   "REG_N": reg}},
                why=f"The tile's size trades reuse against idle edges and registers"
                    f"{_regs(ev)}.",
                plan=f"Tiles of {tile} x {tile} outputs, {reg} x {reg} per thread.",
                risks="the best size depends on the shapes"))
    if "TILE_K" in knobs and int(knobs["TILE_K"]) == 16:
        out.append(Move("knobs", "knob:TILE_K", 1.05, 0.3, type="knobs",
                        params={"values": {"TILE_K": 32}},
                        why="A 16-deep slice pays a barrier pair per 16 steps of the sum.",
                        plan="Stage 32-deep slices (TILE_K 16 -> 32).",
                        risks="twice the shared memory per block"))
    if "COARSEN" in knobs and int(knobs["COARSEN"]) < 16:
        c = int(knobs["COARSEN"])
        out.append(Move("knobs", "knob:COARSEN", 1.05, 0.35, type="knobs",
                        params={"values": {"COARSEN": c * 2}},
                        why=f"COARSEN={c}: more independent loads per thread hide latency.",
                        plan=f"Set COARSEN {c} -> {c * 2}.", risks="fewer threads"))
    return out


def _occupancy(ev: Evidence, ctx: AgentContext) -> tuple[float | None, str]:
    """The occupancy the register choice rests on: ncu's achieved occupancy when the
    profile measured it, else the occupancy table's theoretical one."""
    m = ctx.profile.metrics.get("achieved_occupancy_pct") if ctx.profile is not None else None
    if m is not None and m.value is not None:
        return float(m.value), "achieved (ncu)"
    return ev.occupancy_pct, "theoretical"


def register_moves(ev: Evidence, ctx: AgentContext) -> list[Move]:
    """Spills in a register-tiled kernel: fewer outputs per thread; a register-limited
    kernel: launch bounds on its block shape so ptxas budgets for it."""
    out = []
    occ, occ_src = _occupancy(ev, ctx)
    knobs = ev.knobs
    if ev.spill_bytes and "REG_M" in knobs and int(knobs["REG_M"]) > 1:
        rm = int(knobs["REG_M"])
        rn = int(knobs.get("REG_N", rm))
        out.append(Move(
            "knobs", "register_pressure", 1.2, 0.55, type="knobs",
            params={"values": {"REG_M": max(1, rm // 2), "REG_N": max(1, rn // 2)}},
            why=f"ptxas spills {ev.spill_bytes:.0f} bytes: the {rm} x {rn} register tile does "
                "not fit the thread's registers.",
            plan=f"Halve the register tile (REG_M {rm} -> {max(1, rm // 2)}, REG_N {rn} -> "
                 f"{max(1, rn // 2)}): more threads per tile, fewer registers each.",
            risks="less reuse per shared-memory load"))
    if ev.registers is not None and ev.registers > 64 and (occ is None or occ < 50):
        seen = f" at {occ:.0f}% {occ_src} occupancy" if occ is not None else ""
        out.append(Move(
            "launch_bounds", "launch_bounds", 1.1, 0.45, params={"knob": "BLOCK"},
            why=f"{ev.registers:.0f} registers per thread limit the resident blocks{seen}; "
                "ptxas does not know the block size.",
            plan="Declare __launch_bounds__ with the launch's block shape (BLOCK, or the "
                 "tile's thread grid) so register allocation targets it.",
            risks="spills if the kernel needs more registers than the bound allows"))
    return out
