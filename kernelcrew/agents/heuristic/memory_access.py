"""memory_access: how the kernel moves data. Pass fusion (fewer trips through memory), loop
interchange and tiling for strided access, register blocking of an interchanged matmul nest
(each loaded element of B feeds several rows of C held in registers), restrict so
loads/stores can be reordered and vectorized, the TILE knob; on CUDA read-only loads through
__ldg."""

from __future__ import annotations

import functools

from kernelcrew.agents.context import AgentContext
from kernelcrew.agents.heuristic.base import HeuristicSpecialist, Move
from kernelcrew.agents.heuristic.cuda_moves import product_moves, reduction_moves
from kernelcrew.agents.heuristic.evidence import Evidence
from kernelcrew.agents.transforms import apply_transform


@functools.cache
def l1_data_bytes() -> int:
    """The L1 data cache per core (Linux sysfs), 32 KiB when unknown."""
    try:
        for idx in range(4):
            base = f"/sys/devices/system/cpu/cpu0/cache/index{idx}"
            with open(f"{base}/type") as f:
                if f.read().strip() != "Data":
                    continue
            with open(f"{base}/level") as f:
                if f.read().strip() != "1":
                    continue
            with open(f"{base}/size") as f:
                txt = f.read().strip().upper()
            return int(txt.rstrip("K")) * 1024 if txt.endswith("K") else int(txt)
    except (OSError, ValueError):
        pass
    return 32 * 1024


class MemoryAccess(HeuristicSpecialist):
    name = "memory_access"
    field = "memory traffic and access patterns: passes, strides, tiling, aliasing, loads"

    def moves(self, ctx: AgentContext, ev: Evidence) -> list[Move]:
        return self._cuda_moves(ev, ctx) if ev.backend == "cuda" else self._cpu_moves(ev)

    def _cpu_moves(self, ev: Evidence) -> list[Move]:
        """The CPU moves in the order of their rules: passes fused, strided nests reordered
        or blocked, then the moves whose own legality check is their evidence, restrict,
        and a step of the TILE search."""
        where = ev.facts.strided[0] if ev.facts.strided else ev.stride_note
        out = self._pass_and_stride_moves(ev, where) + self._checked_moves(ev, where)
        if ev.facts.restrict_missing:
            vec = ev.vectorized()
            out.append(Move(
                "restrict", "restrict", 1.25 if vec is False else 1.08, 0.55,
                why="The pointer parameters may alias as far as the compiler knows, so it must "
                    "reload after every store or version loops with runtime overlap checks.",
                plan="Declare the pointer parameters __restrict__ (the harness passes distinct "
                     "buffers for inputs and outputs).",
                risks="wrong results if a caller passed overlapping buffers (the op spec "
                      "forbids it)"))
        if "TILE" in ev.knobs and ev.kf is not None and "TILE" in ev.kf.body:
            mv = self._tile_knob(ev)
            if mv is not None:
                out.append(mv)
        return out

    def _pass_and_stride_moves(self, ev: Evidence, where: str | None) -> list[Move]:
        """Several passes over the arrays fused; a strided inner loop interchanged (a matmul
        nest) or cache-blocked (a copy)."""
        out: list[Move] = []
        strided = (ev.stride is not None and ev.stride > 1) or bool(ev.facts.strided) or \
            ev.access == "poor"
        passes = ev.facts.top_loops
        if passes > 1:
            mem = ev.kind in (None, "memory-bound")
            gain = min(2.5, 1.0 + 0.45 * (passes - 1)) if mem else 1.0 + 0.15 * (passes - 1)
            out.append(Move(
                "fusion", "fusion", gain, 0.8 if mem else 0.6,
                why=f"The kernel makes {passes} separate passes over its arrays, so each element "
                    f"goes through memory {passes} times where once would do.",
                plan="Fuse consecutive loops over the same range whose bodies touch the same "
                     "elements into one loop (checked: every shared array is indexed the same "
                     "way in both), so intermediates stay in registers.",
                risks="a fused body may vectorize worse than the simplest of its parts; "
                      "register pressure"))
        if strided:
            out.append(Move(
                "interchange", "interchange", 3.0, 0.8,
                why=f"The innermost loop walks memory with a large stride ({where}), touching a "
                    "new cache line per element.",
                plan="Interchange the j and k loops of the matmul-like nest (i-j-k -> i-k-j): "
                     "hoist a[i][k] into a register, zero the output row first, and stream rows "
                     "of b and c with unit stride in the inner loop.",
                risks="the output row is re-read k times (it stays in L1 for these sizes)"))
            tile = ev.knobs.get("TILE", 32)
            out.append(Move(
                "tile", "tile", 2.0, 0.7, params={"knob": "TILE", "default": int(tile),
                                                  "inner": "write"},
                why=f"One side of the copy is strided ({where}): every access lands on a "
                    "different cache line and lines are evicted before their neighbours are "
                    "used.",
                plan=f"Cache-block the nest in TILE x TILE tiles (TILE={tile}, a knob), so the "
                     "strided side's lines are reused while they are in L1; inside a tile the "
                     "innermost loop walks the written array contiguously.",
                risks="tile-edge overhead on small or thin shapes"))
        return out

    def _checked_moves(self, ev: Evidence, where: str | None) -> list[Move]:
        """Moves offered where their own legality check passes on the kernel: loops
        exchanged, outputs accumulated a strip at a time, an i-k-j nest blocked in
        registers, output rows streamed past the caches."""
        out: list[Move] = []
        if ev.kf is not None and apply_transform("loop_order", ev.kf.text) is not None:
            # the move's own check is the evidence: a pair whose inner loop walks more of
            # the arrays with a stride than the outer one does
            out.append(Move(
                "loop_order", "loop_order", 2.5, 0.75,
                why="A loop nest walks its arrays with a stride in an inner loop while the "
                    "loop around it would walk them contiguously"
                    + (f" ({where})" if where else "") + ": every access of the inner loop "
                    "touches a new cache line.",
                plan="Exchange the two loops (checked: every iteration of the pair is "
                     "independent of every other, the inner bounds do not depend on the outer "
                     "variable), so the inner loop walks the arrays with unit stride and "
                     "vectorizes.",
                risks="none for the result; a loop with few iterations becomes the inner one"))
        if ev.kf is not None and apply_transform("row_accumulate", ev.kf.text) is not None:
            # the move's own check is the evidence: a per-output reduction nest whose
            # innermost loop is a short constant count, every read unit-stride along the
            # output loop
            out.append(Move(
                "row_accumulate", "row_accumulate", 3.0, 0.75,
                why="Each output is computed by its own reduction nest whose innermost loop "
                    "runs a short constant count (a filter's taps, the padding tested per "
                    "tap) or reads an array down its columns (a transposed mat-vec, a "
                    "covariance's column products): nothing vectorizes, or every load is "
                    "a new cache line.",
                plan="Accumulate a strip of 256 outputs at once: the nest runs once per strip, "
                     "each tap adds its product into the strip's accumulators in one "
                     "unit-stride `omp simd` loop whose bounds are the padding tests, and the "
                     "statements after the nest run over the strip (every sum keeps its "
                     "order of terms).",
                risks="a 1 KB accumulator array per strip; narrow outputs (a few pixels wide) "
                      "gain little"))
        if ev.kf is not None and \
                apply_transform("register_block", ev.kf.text) is not None:
            # JB 0: four 32-byte vectors of C's element (register_block.vector_columns)
            rb, jb = int(ev.knobs.get("RB", 4)), int(ev.knobs.get("JB", 0))
            out.append(Move(
                "register_block", "register_block", 2.0, 0.7,
                params={"rows": "RB", "cols": "JB", "rows_default": rb, "cols_default": jb},
                why="The matmul nest is in i-k-j order: every element of B loaded from L1 feeds "
                    "a single FMA, and the row of C is loaded and stored again at every k "
                    "step, so the loop is bound by loads and stores rather than FMAs.",
                plan=f"Register-block the i-k-j nest (unroll-and-jam of the row loop): RB={rb} "
                     f"rows x {f'JB={jb} columns' if jb else 'JB columns (four 32-byte vectors)'}"
                     " of C accumulate in a local array that stays in "
                     "vector registers over the whole k loop, each loaded element of B feeds "
                     "RB FMAs, and C is stored once; leftover columns run the rows together "
                     "with C in memory, leftover rows (m % RB) run the i-k-j code.",
                risks="register spills if RB x JB is too large for the vector registers; "
                      "little gain when m < RB or n < JB (the leftover paths run)"))
        if ev.kind in (None, "memory-bound") and ev.kf is not None and \
                apply_transform("stream_stores", ev.kf.text) is not None:
            # the move's own check is the evidence (a threaded row loop that only writes
            # its output), with a memory-bound profile: the write-allocate reads are a
            # third of such a loop's traffic
            out.append(Move(
                "stream_stores", "stream_stores", 1.2, 0.5,
                why="A threaded row loop only writes its output (the array is never read in "
                    "the function), yet every store that misses reads its line in first "
                    "(write-allocate): for an output larger than the cache a third of the "
                    "traffic is reads nobody uses.",
                plan="Compute each row 64 bytes at a time into an aligned buffer (omp simd) "
                     "and write it with non-temporal stores, past the caches; the row's "
                     "unaligned head and its tail stay as they were; one sfence after the "
                     "loop nest.",
                risks="an output that would have stayed in cache for its next reader is "
                      "sent to memory (the serial path for small sizes is left alone); no "
                      "gain where the loop is bound by its reads"))
        return out

    def _tile_knob(self, ev: Evidence) -> Move | None:
        """One step of the TILE search, in the direction the cache size allows."""
        t = int(ev.knobs["TILE"])
        l1 = l1_data_bytes()
        footprint = 2 * t * t * 4  # a read tile and a write tile of floats
        if ev.bandwidth_pct is not None and ev.bandwidth_pct > 70:
            return None  # already near the bandwidth roof: nothing for a tile size to win
        if 2 * (2 * t) ** 2 * 4 <= l1:
            new, why = 2 * t, (f"two {t}x{t} tiles take {footprint // 1024} KiB of the "
                               f"{l1 // 1024} KiB L1: larger tiles amortize the tile loops and "
                               "use longer contiguous runs")
        elif footprint > l1:
            new, why = max(8, t // 2), (f"two {t}x{t} tiles take {footprint // 1024} KiB, more "
                                        f"than the {l1 // 1024} KiB L1")
        else:
            return None
        return Move("knobs", "knob:TILE", 1.1, 0.45, type="knobs",
                    params={"values": {"TILE": new}},
                    why=f"The tile size decides what stays in L1: {why}.",
                    plan=f"Set TILE {t} -> {new}.",
                    risks="a worse size for shapes that are not multiples of the tile")

    def _cuda_moves(self, ev: Evidence, ctx: AgentContext) -> list[Move]:
        """Launches fused, rows to blocks, tiles; the product kernels tiled (or on the
        tensor cores), atomics and softmax passes reduced (`cuda_moves`); vector width and
        read-only loads."""
        out: list[Move] = product_moves(ev, ctx) + reduction_moves(ev)
        # a reduction loop that walks memory with a stride (down a column) is coalesced
        # across threads already: its loop is split over the block, not handed to a block
        # and a block sum finished with atomics is atomic_reduce's, which also drops the
        # per-element (or per-block) atomics: block_reduce alone would only reshape the tree
        not_per_row = bool(ev.facts.strided) or (
            ev.kf is not None and apply_transform("atomic_reduce", ev.kf.text) is not None)
        launches = len(ev.kf.meta.launch) if ev.kf is not None else 0
        mem = ev.kind in (None, "memory-bound", "latency-bound")
        if launches > 1:
            out.append(Move(
                "launch_fusion", "launch_fusion", min(2.5, 1.0 + 0.5 * (launches - 1)), 0.8,
                why=f"The launch plan runs {launches} kernels over the same index space: each "
                    "intermediate is written to memory by one launch and read back by the "
                    "next, and every launch pays its own start-up.",
                plan="Fuse the consecutive one-index-per-thread launches into one kernel "
                     "(checked: same grid, block and index bound; every shared array touched "
                     "at the thread's own index), so temps that only these launches use "
                     "become registers and the plan has one launch.",
                risks="more registers per thread in the fused kernel"))
        out.append(Move(
            "block_reduce", "block_reduce", (4.0 if mem else 2.0) if not not_per_row else 1.2, 0.75,
            why="One thread walks each row: neighbouring threads read addresses a whole row "
                "apart (one cache line per element per thread), and only as many threads run "
                "as there are rows.",
            plan="Give each row a block: the threads stride over the row (coalesced), each "
                 "reduction is combined with warp shuffles (__shfl_down_sync) and one "
                 "shared-memory stage, and later passes read the reduced value from "
                 "registers; the grid becomes the rows.",
            risks="short rows leave most of a block idle; BLOCK becomes the row's thread "
                  "count"))
        out.append(Move(
            "smem_tile", "smem_tile", 2.5, 0.75,
            why="A transposing copy: one side of every thread's access is strided, so half "
                "the traffic is uncoalesced (a sector per element).",
            plan="Move the copy through a 32x33 shared-memory tile (padded against bank "
                 "conflicts): a block reads a tile along the source's contiguous side and "
                 "writes it along the destination's, so both are coalesced.",
            risks="a barrier per tile; the edge tiles are partly idle"))
        out.append(Move(
            "vector_access", "vector_access", 1.35 if mem else 1.1, 0.6,
            params={"knob": "VEC", "default": 4},
            why="Each thread moves one 4-byte element per access: many narrow memory "
                "instructions per byte, and too few bytes in flight per thread to reach the "
                "bandwidth.",
            plan="Handle VEC=4 consecutive elements per thread with 16-byte float4 loads "
                 "and stores (LDG.E.128), checked for alignment at run time with a scalar "
                 "path for tails; the grid is divided by VEC.",
            risks="fewer threads for small sizes; arrays read at other indices stay scalar"))
        if ev.facts.restrict_missing or "__ldg" not in (ev.kf.body if ev.kf else ""):
            out.append(Move(
                "ldg", "ldg", 1.15, 0.55,
                why="Read-only inputs are loaded through the ordinary global path: without "
                    "__restrict__ the compiler cannot prove they do not change, so it neither "
                    "uses the read-only cache nor keeps loaded values.",
                plan="Mark pointer parameters __restrict__ and route reads of const inputs "
                     "through __ldg(&x[i]) (read-only data cache).",
                risks="none if inputs and outputs never overlap (they do not in this harness)"))
        return out
