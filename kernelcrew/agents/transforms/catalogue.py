"""The catalogue of moves: every built-in move registered, one `register_transform` call
each, in the order users see them listed (the not-applicable list, a run's stop reason);
and `not_applicable`, which says of each move that does not apply to a kernel file why.

A new move is one module (`cpu/`, `cuda/` or `any_backend/`) and one call here; see
docs/moves.md. A run that stops with nothing left to try lists `not_applicable`, so a user
sees every move that was considered and the reason it was not made (the legality check
that failed, the loop form that is missing, a helper out of reach).
"""

from __future__ import annotations

import re
from typing import Any

from kernelcrew.agents.transforms.analysis.parallel import DEFAULT_MIN_WORK
from kernelcrew.agents.transforms.analysis.scope import scope_of
from kernelcrew.agents.transforms.any_backend import restrict, settings, unroll
from kernelcrew.agents.transforms.cpu import (
    accumulators,
    blocked_scan,
    compiler,
    float_powers,
    fusion,
    jam_sweeps,
    keep_values,
    loop_nests,
    omp_parallel,
    private_bins,
    reciprocal,
    register_block,
    register_tile,
    row_accumulate,
    simd,
    split_ranges,
    stream_stores,
    time_steps,
    unroll_and_jam,
    vector_exp_erf,
    vector_scan,
    vector_tanh_log,
)
from kernelcrew.agents.transforms.cuda import (
    async_copy,
    atomic_reduce,
    block_reduce,
    coarsen,
    kernel_attributes,
    launch_fusion,
    matmul_tile,
    online_softmax,
    smem_tile,
    split_reduce,
    tensor_core,
    vector_access,
)
from kernelcrew.agents.transforms.kernel_files import parse_any
from kernelcrew.agents.transforms.registry import (
    TRANSFORMS,
    apply_transform,
    register_transform,
)
from kernelcrew.agents.transforms.views import through_views
from kernelcrew.csource.syntax import Source
from kernelcrew.errors import InputError

# ---------------------------------------------------------------- the built-in moves

register_transform(
    "restrict", ("cpu", "cuda"),
    "__restrict__ on the pointer parameters of the entry (every kernel on CUDA)",
    restrict.add_restrict,
    why_not=restrict.why_not)
register_transform(
    "omp_parallel", ("cpu",),
    "#pragma omp parallel for on independent outer loops; the serial copy runs below "
    "OMP_MIN_WORK inner iterations (a knob)",
    omp_parallel.omp_parallel_in_file,
    whole_file=True, min_work=DEFAULT_MIN_WORK, knob="OMP_MIN_WORK",
    why_not=omp_parallel.why_not)
register_transform(
    "omp_version", ("cpu",),
    "an `omp parallel for` already in the source gets a serial version below "
    "OMP_MIN_WORK (a knob) inner iterations",
    omp_parallel.omp_version_in_file,
    whole_file=True, min_work=DEFAULT_MIN_WORK, knob="OMP_MIN_WORK")
register_transform(
    "stream_stores", ("cpu",),
    "a row loop that only writes its output (`out_row[i] = ...`, the array never read "
    "in the function) with non-temporal stores: a 64-byte batch computed under omp "
    "simd, then written past the caches; the row's unaligned head and tail kept; one "
    "sfence after the loop nest. Not while the nest could still be threaded (the "
    "streamed form would keep it serial): threading comes first",
    stream_stores.stream_stores_in_file,
    whole_file=True, why_not=stream_stores.why_not)
register_transform(
    "private_bins", ("cpu",),
    "thread a histogram / scatter-add loop (`counts[v[i]]++`, `+= w[i]`) with private "
    "bins per thread (`reduction(+ : counts[0:bins])`, the extent from the op's shape); "
    "the serial loop below OMP_MIN_WORK values or PRIVATE_PER_BIN values per bin; "
    "`copies` interleaved copies per thread break the store-to-load chain of runs of "
    "equal values",
    private_bins.private_bins_in_file,
    whole_file=True, extents={}, min_work=DEFAULT_MIN_WORK, knob="OMP_MIN_WORK",
    copies=1, why_not=private_bins.why_not)
register_transform(
    "blocked_scan", ("cpu",),
    "blocked two-pass parallel prefix sums: blocks of a long scan (`acc += x[j]; "
    "y[j] = acc;`) scanned on threads, offset by the totals before them; many rows "
    "threaded whole instead (SCAN_MIN, SCAN_BLOCKS, SCAN_ROWS knobs)",
    blocked_scan.blocked_scan_in_file,
    whole_file=True, why_not=blocked_scan.why_not)
register_transform(
    "simd", ("cpu",),
    "#pragma omp simd (+ reductions) on innermost loops",
    through_views(simd.omp_simd_inner, until_done=True),
    why_not=simd.why_not)
register_transform(
    "unroll", ("cpu", "cuda"),
    "unroll pragmas on innermost loops",
    unroll.unroll_in_file,
    whole_file=True, factor=4, why_not=unroll.WHY_NOT)
register_transform(
    "interchange", ("cpu",),
    "i-j-k matmul nest (or a sum down columns) with a strided inner read -> "
    "i-k-j; a nest split across a helper call or walked with *p++ is seen whole",
    through_views(loop_nests.interchange),
    
    why_not="no i-j-k product nest whose innermost loop reads an operand with a stride")
register_transform(
    "register_block", ("cpu",),
    "unroll-and-jam the rows of an i-k-j matmul nest: RB rows x JB columns of C "
    "accumulated in registers (RB, JB knobs), leftover rows and columns kept",
    register_block.register_block_in_file,
    whole_file=True, rows="RB", cols="JB", rows_default=4, cols_default=0,
    why_not="no i-k-j product nest (interchanged) to block in registers")
register_transform(
    "unroll_and_jam", ("cpu",),
    "register-tile dot-product nests: FACTOR outputs of the outer loop share one "
    "pass of the inner reduction (FACTOR accumulators, omp simd reduction), the "
    "rest kept; a nest split across a helper call or walked with *p++ is seen whole; "
    "an omp parallel for on the outer loop stays on the jammed loop",
    through_views(unroll_and_jam.unroll_and_jam),
    factor=4, why_not=unroll_and_jam.why_not)
register_transform(
    "register_tile", ("cpu",),
    "register-tile a dot-product nest and the row loop around it: ROWS rows x "
    "COLS outputs share one pass of the inner reduction (ROWS*COLS "
    "accumulators, omp simd reduction), so each element of either operand is "
    "loaded once per tile; leftover rows and outputs kept; a parallel for or "
    "collapse(2) on the rows kept",
    through_views(register_tile.register_tile),
    rows=4, cols=4, why_not=register_tile.why_not)
register_transform(
    "reciprocal", ("cpu",),
    "a division by a float the loop does not change (`y[j] /= sum`) as a "
    "multiply by its reciprocal, taken once before the loop",
    through_views(reciprocal.reciprocal),
    why_not="no division by a float variable that a loop does not change")
register_transform(
    "float_pow", ("cpu",),
    "`pow(x, 2)` (or 3) of a float whose result becomes float, written as a product in "
    "float: no round trip through double, so the loop vectorizes at float width",
    through_views(float_powers.float_powers),
    why_not="no pow(x, 2) or pow(x, 3) of a float value whose result becomes float")
register_transform(
    "split_ranges", ("cpu",),
    "a loop whose body tests its counter against bounds (padding, borders) run as the "
    "ranges where the test is decided: the middle one without the counter's comparisons",
    through_views(split_ranges.split_ranges),
    why_not="no innermost loop whose test (`?:` or `if` of `||`/`&&` comparisons) is "
            "linear in its counter")
register_transform(
    "vector_scan", ("cpu",),
    "prefix sums (`acc += x[j]; y[j] = acc;`) a vector at a time: the prefix of "
    "8 floats (4 doubles) taken in registers by shift-and-add steps, the running "
    "total added as one broadcast",
    through_views(vector_scan.vector_scan),
    why_not=vector_scan.why_not)
register_transform(
    "accumulators", ("cpu",),
    "WAYS accumulators for innermost reduction loops (WAYS contiguous parts "
    "walked side by side under omp simd), the rest of the range kept",
    through_views(accumulators.accumulators),
    ways=4, why_not=accumulators.why_not)
register_transform(
    "tile", ("cpu",),
    "cache-block a strided 2-deep nest (transpose) with a TILE knob",
    loop_nests.tile_in_file,
    whole_file=True, knob="TILE", default=32, inner="write",
    why_not="no 2-deep nest with a strided access for cache blocking to fix")
register_transform(
    "loop_order", ("cpu",),
    "exchange a perfectly nested independent pair of loops whose inner loop "
    "walks memory with a stride and the outer contiguously (column-order "
    "code, convolutions with the time loop outside the channels)",
    through_views(loop_nests.swap_loops),
    
    why_not="no perfectly nested independent pair whose inner loop is the strided one")
register_transform(
    "row_accumulate", ("cpu",),
    "accumulate a strip of outputs at once: a per-output reduction nest with a "
    "short constant inner loop (a convolution's taps, padding tested per tap) "
    "runs once per strip of 256 outputs, each tap a unit-stride simd loop over "
    "the strip with the padding tests as its bounds; each sum keeps its order",
    through_views(row_accumulate.row_accumulate),
    why_not=row_accumulate.why_not)
register_transform(
    "keep_values", ("cpu",),
    "a pure call (a helper, exp/log/tanh...) that a later loop over the same "
    "range recomputes is kept in a row buffer by the first loop and read back; "
    "a math function of it that opens the later loop runs first as its own "
    "simd loop over the buffer",
    through_views(keep_values.keep_values),
    why_not=keep_values.why_not)
register_transform(
    "fusion", ("cpu",),
    "fuse consecutive loops over the same range that touch the same elements",
    fusion.fuse_loops,
    why_not="no consecutive loops over the same range that touch the same elements")
register_transform(
    "vector_math", ("cpu",),
    "float exp/erf calls in loops -> inline vectorizable kc_expf/kc_erff",
    vector_exp_erf.vector_math,
    why_not="no float exp/erf call inside a loop")
register_transform(
    "vector_math_ext", ("cpu",),
    "float tanh/log calls in loops -> inline vectorizable kc_tanhf/kc_logf",
    vector_tanh_log.vector_math_ext,
    why_not="no float tanh/log call inside a loop")
register_transform(
    "flags", ("cpu", "cuda"),
    "edit the flag list: add / remove, or set it outright (OpenMP flags follow pragmas)",
    settings.flags_in_file,
    whole_file=True, add=(), remove=(), set=None)
register_transform(
    "knobs", ("cpu", "cuda"),
    "set knob values",
    settings.knobs_in_file,
    whole_file=True, values={})
register_transform(
    "ldg", ("cuda",),
    "__restrict__ + __ldg on read-only global loads of every kernel",
    kernel_attributes.ldg_in_file,
    whole_file=True, why_not="no read-only global load left without __ldg")
register_transform(
    "launch_bounds", ("cuda",),
    "__launch_bounds__(BLOCK) on kernels launched with block [BLOCK] (or one block shape "
    "of knobs and integers: their product); with min_blocks, "
    "__launch_bounds__(BLOCK, min_blocks)",
    kernel_attributes.launch_bounds_in_file,
    whole_file=True, knob="BLOCK", min_blocks=None,
    why_not="no kernel launched with one block shape made of knobs and integers, or every "
            "such kernel has its bound already")
register_transform(
    "grid_stride", ("cuda",),
    "one-element-per-thread kernels -> grid-stride loops; the grid is capped by a "
    "GRID_CAP knob",
    kernel_attributes.grid_stride_in_file,
    whole_file=True, knob="GRID_CAP", default=1056,
    why_not="no one-element-per-thread kernel")
register_transform(
    "sequence", ("cpu", "cuda"),
    "several transformations in order; steps that no longer apply are skipped",
    settings.sequence_in_file,
    whole_file=True, steps=[])
register_transform(
    "launch_fusion", ("cuda",),
    "consecutive launches that each handle one index per thread over the same index "
    "space -> one kernel; temps only they use become registers",
    launch_fusion.launch_fusion_in_file,
    whole_file=True)
register_transform(
    "vector_access", ("cuda",),
    "VEC elements per thread, loaded and stored as float4/double2 (alignment checked at "
    "run time, scalar tail); the grid divided by VEC",
    vector_access.vector_access_in_file,
    whole_file=True, knob="VEC", default=4)
register_transform(
    "block_reduce", ("cuda",),
    "one thread per row -> one block per row: loops stride over the block, reductions "
    "combined with warp shuffles and one shared-memory stage; the grid becomes the rows",
    block_reduce.block_reduce_in_file,
    whole_file=True)
register_transform(
    "smem_tile", ("cuda",),
    "transposing copies through a padded TILE x (TILE+1) shared-memory tile: reads and "
    "writes both coalesced; 2-D grid of tiles, block [TILE, TILE_ROWS]",
    smem_tile.smem_tile_in_file,
    whole_file=True, tile=32, tile_rows=8)

# ---------------------------------------------------------------- CUDA: tiles, tensor cores, reductions

register_transform(
    "matmul_tile", ("cuda",),
    "one thread per output of a product loop (acc += A[row, q] * B[q, col]) -> one block "
    "per TILE_M x TILE_N output tile: A and B staged through shared memory TILE_K at a "
    "time (coalesced, zero-padded at the edges), REG_M x REG_N outputs per thread in "
    "registers; the kernel's own epilogue finishes each output",
    matmul_tile.matmul_tile_in_file,
    whole_file=True, tile_m=64, tile_n=64, tile_k=16, reg_m=4, reg_n=4,
    why_not=matmul_tile.why_not)
register_transform(
    "tensor_core", ("cuda",),
    "the same product kernels on the tensor cores (wmma, fp32 accumulation): a 64 x 64 "
    "tile per block of four warps, __half/__nv_bfloat16 operands, float ones as TF32 only "
    "with tf32=1; legal only where the op's tolerance (rtol, atol) allows the precision",
    tensor_core.tensor_core_in_file,
    whole_file=True, rtol=-1.0, atol=-1.0, tf32=0, why_not=tensor_core.why_not)
register_transform(
    "async_copy", ("cuda",),
    "element copies from a read-only buffer into shared memory (S[e] = G[f]) as "
    "asynchronous copies (cp.async, sm_80+: no register round trip), completed just "
    "before the barrier that publishes the array",
    async_copy.async_copy_in_file,
    whole_file=True, why_not=async_copy.why_not)
register_transform(
    "atomic_reduce", ("cuda",),
    "sums added with atomicAdd to one address (per element, or per block after a "
    "shared-memory tree) -> a register sum per thread over a grid-stride loop, one block "
    "reduction with warp shuffles and one atomicAdd per block; the grid capped by GRID_CAP",
    atomic_reduce.atomic_reduce_in_file,
    whole_file=True, knob="GRID_CAP", default=1056, why_not=atomic_reduce.why_not)
register_transform(
    "online_softmax", ("cuda",),
    "a softmax's max pass and exp-sum pass as one pass (the sum rescaled when the maximum "
    "grows), the exponentials recomputed where they were stored and read back; on one "
    "block per row (after block_reduce) one block reduction of (max, sum) pairs",
    online_softmax.online_softmax_in_file,
    whole_file=True, why_not=online_softmax.why_not)
register_transform(
    "coarsen", ("cuda",),
    "thread coarsening: COARSEN indices per thread a block apart (each step coalesced, "
    "the steps' loads in flight together), any element type, gathers too; the grid "
    "divided by COARSEN",
    coarsen.coarsen_in_file,
    whole_file=True, knob="COARSEN", default=4, why_not=coarsen.why_not)
register_transform(
    "split_reduce", ("cuda",),
    "one output per thread with a long reduction loop whose reads are already coalesced "
    "across threads (a column sum, a transposed mat-vec) -> blocks [SPLIT_X, SPLIT_Y]: the "
    "loop split over the y threads, partials combined in shared memory",
    split_reduce.split_reduce_in_file,
    whole_file=True, x=32, y=8, why_not=split_reduce.why_not)

# ---------------------------------------------------------------- code bases never seen
# (moves for functions as other code bases write them, and the toolchain as a move)

register_transform(
    "compiler", ("cpu",),
    "build with another compiler and its own flags: clang++ (-O3 -march=native), or "
    "clang++ with Polly (polly=True: tiling, outer-loop vectorization and -polly-parallel "
    "threads on libgomp); not where the compiler is missing, nor clang++ without Polly on "
    "a kernel with threading pragmas (it builds them as serial code)",
    compiler.compiler_in_file,
    whole_file=True, cc="clang++", polly=False, flags=[], why_not=compiler.why_not)


register_transform(
    "jam_sweeps", ("cpu",),
    "several rows of a row sweep at once: an outer loop whose body runs several inner "
    "loops (a dot product, then the row added into a vector: A^T(Ax)) or one that both "
    "reduces and updates (two mat-vecs sharing A), jammed by FACTOR: each inner loop runs "
    "once for FACTOR rows, U sums under omp simd, the updated vector loaded once per "
    "FACTOR rows",
    through_views(jam_sweeps.jam_sweeps),
    factor=4, why_not=jam_sweeps.why_not)


register_transform(
    "time_steps", ("cpu",),
    "threads inside each step of a time-stepped nest (a stencil's T steps over two "
    "arrays) with one parallel region around the time loop: each step's loops `omp for`, "
    "their barriers keeping the steps in order; the serial nest below OMP_MIN_WORK work "
    "per step (a knob)",
    time_steps.time_steps_in_file,
    whole_file=True, min_work=DEFAULT_MIN_WORK, knob="OMP_MIN_WORK",
    why_not=time_steps.why_not)

# ---------------------------------------------------------------- why a move does not apply

# moves that are settings, not rewrites: never "not applicable"
SETTINGS = {"flags", "knobs", "sequence"}
_NO_FORM = "the source has no loop of the form it rewrites"


def _why(kf: Any, name: str) -> str:
    why = TRANSFORMS[name].why_not
    if why is None:
        return _NO_FORM
    return why if isinstance(why, str) else why(kf)


def not_applicable(kernel_text: str) -> dict[str, str]:
    """Transformation name -> why it does not apply to this kernel file (transformations
    that do apply are left out). Helpers out of reach come first, as `scope`."""
    try:
        kf = parse_any(kernel_text)
    except InputError as e:
        return {"all": f"the kernel file does not parse: {e}"}
    out: dict[str, str] = {}
    if kf.backend == "cpu" and kf.meta.entry:
        sc = scope_of(Source(kf.body), kf.meta.entry)
        if sc.excluded:
            out["scope"] = "; ".join(f"helper {h}() is out of reach: {why}"
                                     for h, why in sc.excluded.items())
    for name, t in TRANSFORMS.items():
        if name in SETTINGS or kf.backend not in t.backends:
            continue
        if apply_transform(name, kernel_text) is not None:
            continue
        out[name] = _why(kf, name)
    # the analysis counts lines of the source; the user reads lines of the kernel file
    off = kf.text[: len(kf.text) - len(kf.body)].count("\n")
    return {k: re.sub(r"\bline (\d+)", lambda m: f"line {int(m[1]) + off}", v)
            for k, v in out.items()}


def describe(kernel_text: str) -> list[dict[str, Any]]:
    """Every move of the kernel file's backend, in catalogue order: its name, its doc line,
    its parameters with their defaults, and `why_not`, None where it applies to this file
    (settings included) or why it does not."""
    kf = parse_any(kernel_text)
    why = not_applicable(kernel_text)
    return [{"name": name, "doc": t.doc, "params": dict(t.params), "why_not": why.get(name)}
            for name, t in TRANSFORMS.items() if kf.backend in t.backends]
