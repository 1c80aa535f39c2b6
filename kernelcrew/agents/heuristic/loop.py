"""loop: how loops map onto the machine. Threads on independent outer loops, SIMD (with
reductions) on inner loops, unrolling; on CUDA grid-stride loops, launch bounds and
unrolling; the kernel's own knobs (BLOCK, UNROLL, ...) searched in the direction the
evidence points, BLOCK one step at a time, the others by a ladder of two values per step."""

from __future__ import annotations

import re

from kernelcrew.agents.context import AgentContext
from kernelcrew.agents.heuristic.base import HeuristicSpecialist, Move
from kernelcrew.agents.heuristic.cuda_moves import launch_moves
from kernelcrew.agents.heuristic.evidence import Evidence
from kernelcrew.agents.transforms import apply_transform
from kernelcrew.csource.syntax import Source, find_function, params

# knobs searched elsewhere: TILE by memory_access, the threading threshold by its own rule;
# RB/JB (register_block) are sized for the vector registers and not worth a ladder
BIN_COPIES = 4  # interleaved copies of a histogram's bins per thread, as hand-written ones keep
_NOT_MINE = {"TILE", "TILE_ROWS", "GRID_CAP", "OMP_MIN_WORK", "RB", "JB",
             # CUDA: the tile shape and coarsening move by their own rungs (cuda_moves)
             "TILE_M", "TILE_N", "TILE_K", "REG_M", "REG_N", "COARSEN"}
# each threaded attempt that regressed a group raises the threshold one step
MAX_KNOB_STEPS = 2


def _knob_steps(ctx: AgentContext, name: str) -> int:
    """Accepted changes of a knob so far in this run."""
    kind = f"knob:{name}"
    notes = [(n.kind, n.outcome) for n in ctx.recent] + [
        (line.split(" by ")[0], line.rsplit(": ", 1)[-1].split()[0]) for line in ctx.tried
        if " by " in line and ": " in line]
    return sum(1 for k, o in notes if kind in k.split("+") and o == "accepted")


# the inline math moves: (transform, the calls it replaces, why g++ leaves them scalar,
# what replaces them)
_VECTOR_MATH = [
    ("vector_math", r"(exp|erf)f?",
     "g++ cannot vectorize a loop around a call it has no vector version of",
     ("kc_expf: Cody-Waite reduction + degree-6 polynomial, ~1.4 ulp; kc_erff: polynomial / "
      "exp-of-polynomial, abs. error < 2e-7")),
    ("vector_math_ext", r"(tanh|log)f?",
     "g++ has no vector version of it without -ffast-math",
     ("kc_tanhf: odd polynomial near 0, 1 - 2/(e^2x + 1) beyond; kc_logf: exponent split + "
      "atanh series; both within 2 ulp")),
]
LARGER_WORK = [("omp_parallel:large", 1 << 23), ("omp_parallel:huge", 1 << 25)]
_REGRESSED = re.compile(r"the (\w+) group regresses \(([\d.]+x)[,)]")


def _threading_regressed(ctx: AgentContext) -> tuple[str, str, int] | None:
    """(group, speedup, attempts) when threaded candidates lost the gate on a regressing
    group (thread start-up or scheduling stalls on mid-size shapes)."""
    hits = []
    for note in ctx.recent:
        if "omp_parallel" in note.kind and note.outcome != "accepted":
            m = _REGRESSED.search(note.detail)
            if m:
                hits.append((m.group(1), m.group(2)))
    return (*hits[-1], len(hits)) if hits else None


def _own_check(ev: Evidence, name: str) -> bool:
    """The move's own legality check passes on the kernel: its evidence."""
    return ev.kf is not None and apply_transform(name, ev.kf.text) is not None


def source_extents(ctx: AgentContext, ev: Evidence) -> dict[str, str]:
    """The op's array extents (op.yaml shapes) in the names the entry's source uses: the
    harness passes the entry its arrays and sizes in op.yaml's order, whatever the source
    calls them, so the names are matched by position."""
    if ev.kf is None or not ev.kf.meta.entry or not ctx.extents or not ctx.entry_params:
        return {}
    fn = find_function(Source(ev.kf.body), ev.kf.meta.entry)
    ps = params(fn) if fn is not None else []
    if len(ps) != len(ctx.entry_params):
        return {}
    names = {ep["name"]: p.name for ep, p in zip(ctx.entry_params, ps, strict=True)}
    out = {}
    for array, ext in ctx.extents.items():
        words = re.findall(r"\b[A-Za-z_]\w*\b", ext)
        if array not in names or any(w not in names for w in words):
            continue
        out[names[array]] = re.sub(r"\b[A-Za-z_]\w*\b", lambda m: names[m[0]], ext)
    return out


class Loop(HeuristicSpecialist):
    name = "loop"
    field = "loop structure: threads, SIMD and reductions, unrolling, launch shape, knobs"

    def moves(self, ctx: AgentContext, ev: Evidence) -> list[Move]:
        out = self._cuda_moves(ev, ctx) if ev.backend == "cuda" else self._cpu_moves(ev, ctx)
        out += self._knobs(ev, ctx)
        return out

    def _cpu_moves(self, ev: Evidence, ctx: AgentContext) -> list[Move]:
        """The CPU moves in the order of their rules: threads, vector math, the moves on
        loop nests and reductions, then simd and unrolling."""
        return (self._thread_moves(ev, ctx) + self._vector_math_moves(ev)
                + self._nest_moves(ev) + self._chain_moves(ev) + self._simd_moves(ev))

    def _thread_moves(self, ev: Evidence, ctx: AgentContext) -> list[Move]:
        """Threads on a serial kernel (again with a larger threshold where threading lost on
        a group), histograms and prefix sums threaded their own way, a serial version for
        the source's own `parallel for`."""
        out: list[Move] = []
        cores = ev.cores()
        regressed = _threading_regressed(ctx)
        if ev.serial() and cores > 1 and not regressed:
            if ev.kind in ("compute-bound", "latency-bound") or ev.facts.reductions or \
                    ev.facts.math_calls:
                gain = 0.85 * cores
            elif ev.bandwidth_pct is not None:
                gain = max(1.1, min(0.85 * cores, 75.0 / max(ev.bandwidth_pct, 1.0)))
            else:
                gain = 1.6
            out.append(Move(
                "omp_parallel", "omp_parallel", gain, 0.75,
                why=f"Only one of the {cores} cores works"
                    + (f" ({ev.bandwidth_pct:.0f}% of peak bandwidth used)"
                       if ev.bandwidth_pct is not None else "") + ".",
                plan="Split the independent outer loop across threads with `#pragma omp "
                     "parallel for schedule(static)` (checked: each iteration writes only its "
                     "own elements); consecutive passes share one parallel region. The threaded "
                     "copy runs only above OMP_MIN_WORK (a knob, 1M) inner iterations; smaller "
                     "shapes keep the serial code.",
                risks="thread start-up (a few microseconds) on mid-size shapes; no gain when "
                      "one thread already saturates memory bandwidth"))
        if regressed and ev.serial() and cores > 1 and regressed[2] <= len(LARGER_WORK):
            group, detail, attempts = regressed
            kind, work = LARGER_WORK[attempts - 1]
            out.append(Move(
                "omp_parallel", kind, 1.5, 0.6, params={"min_work": work},
                why=f"Threading was tried and the {group} group regressed ({detail}): thread "
                    "start-up and scheduling cost more than mid-size shapes take.",
                plan=f"Thread the independent outer loop again, but keep the serial copy for "
                     f"work below {work} inner iterations (OMP_MIN_WORK), so only the "
                     "large shapes pay for threads.",
                risks="mid-size shapes stay single-threaded"))
        out += self._bins_and_scan_moves(ev, ctx, cores, regressed)
        if ev.facts.threaded:
            out.append(Move(
                "omp_version", "omp_version", 1.1, 0.45,
                why="The source threads its loops with its own `omp parallel for` for every "
                    "shape: tiny shapes pay the thread start-up (microseconds) for work of "
                    "nanoseconds.",
                plan="Keep the pragma and add a serial version of the loop, taken below "
                     "OMP_MIN_WORK (a knob, 1M) inner iterations.",
                risks="none for large shapes; mid-size shapes near the threshold may pick the "
                      "slower version"))
        return out

    def _bins_and_scan_moves(self, ev: Evidence, ctx: AgentContext, cores: int,
                             regressed: tuple[str, str, int] | None) -> list[Move]:
        """Loops that threads cannot take as written: a scatter into bins (private copies),
        a prefix sum (a blocked scan)."""
        out: list[Move] = []
        extents = source_extents(ctx, ev)
        if extents and cores > 1 and not regressed:
            out.append(Move(
                "private_bins", "private_bins", 0.8 * cores, 0.6,
                params={"extents": extents, "copies": BIN_COPIES},
                why="The loop scatters into an array of bins (`counts[v[i]]++`): two "
                    "iterations may hit the same bin, so it runs on one core, and a run of "
                    "equal values waits on one counter's store-to-load chain.",
                plan="Thread it with private bins: each thread counts its share into its own "
                     f"zeroed copies ({BIN_COPIES} interleaved copies where the loop has one "
                     "array of bins, consecutive values going to different copies; an "
                     "array-section reduction `reduction(+ : bins[0:extent])` otherwise; the "
                     "extent from the op's shape), the copies added at the end; threads from "
                     "OMP_MIN_WORK values, the serial loop below PRIVATE_MIN_WORK values or "
                     "PRIVATE_PER_BIN (8) values per bin and copy.",
                risks="clearing and adding the copies costs passes over the bins; "
                      "float bins are summed in another order (inside the tolerance)"))
            # rows added into one vector (`y[j] += a[i][j] * x[i]` after interchange): the
            # copies make the row loop a plain loop again, one the jam can take, and the
            # jam is what stops each row from loading and storing the vector again
            out.append(Move(
                "private_bins", "private_bins", 0.9 * cores, 0.55,
                params={"extents": extents, "copies": BIN_COPIES,
                        "then": [["unroll_and_jam", {"factor": 4}]]},
                why="Rows are added one by one into a vector of sums on one core: each row "
                    "loads and stores the whole vector again.",
                plan="Thread the rows with private copies of the sums (as the move above), "
                     "and in each thread's share add four rows per pass over its copy "
                     "(unroll-and-jam by 4, the additions in their order): one load and one "
                     "store of a sum for four rows.",
                risks="as the move above; four row streams at once"))
            # the same with a row sweep's jam (a dot product of the row, then the row
            # added into the vector: A^T(Ax)), where the rows' own loop has several passes
            if _own_check(ev, "jam_sweeps"):
                out.append(Move(
                    "private_bins", "private_bins", 0.9 * cores, 0.5,
                    params={"extents": extents, "copies": BIN_COPIES,
                            "then": [["jam_sweeps", {"factor": 4}]]},
                    why="Rows are added into a vector of sums inside a row sweep that also "
                        "takes each row's dot product: the rows are linked through the "
                        "vector, so they run on one core.",
                    plan="Thread the rows with private copies of the sums, then jam four "
                         "rows into each pass of the sweep's inner loops.",
                    risks="as the moves above"))
        if cores > 1 and not regressed:
            out.append(Move(
                "blocked_scan", "blocked_scan", 0.75 * cores, 0.55,
                why="A prefix sum carries its running total from one element to the next: "
                    "as written, a long scan (or a few long rows) runs on one core.",
                plan="A blocked two-pass scan: each thread scans its blocks from zero, one "
                     "thread turns the block totals into offsets, each thread adds its "
                     "blocks' offsets (from SCAN_MIN elements, SCAN_BLOCKS blocks); where "
                     "there are SCAN_ROWS rows or more, the rows are threaded whole instead.",
                risks="two passes over the output instead of one: little gain when one core "
                      "already saturates memory; a float sum is reassociated (inside the "
                      "tolerance)"))
        return out

    def _vector_math_moves(self, ev: Evidence) -> list[Move]:
        """Inline vector math for the libm calls the loops make."""
        out: list[Move] = []
        for move, names, why, versions in _VECTOR_MATH:
            found = [c for c in ev.facts.math_calls if re.fullmatch(names, c)]
            if not found:
                continue
            calls = ", ".join(found)
            cpu_time = ev.kind in (None, "compute-bound", "latency-bound")
            hot = bool(ev.libm_share)
            out.append(Move(
                move, move, 3.0 if cpu_time or hot else 1.3,
                0.8 if hot else 0.7 if cpu_time else 0.4,
                why=f"The loops call libm's scalar {calls} once per element: {why}, so those "
                    "loops run one element at a time.",
                plan=f"Replace {calls} in the loops by inline, branch-free float versions "
                     f"({versions}), so the loops vectorize under omp simd.",
                risks="results differ from libm in the last bit or two (inside the op "
                      "tolerance); float arguments only"))
        return out

    def _nest_moves(self, ev: Evidence) -> list[Move]:
        """Moves each offered where its own legality check passes on the kernel or the
        evidence found its nest: a value computed twice, a row loop around a dot product,
        a division by an invariant, a prefix sum."""
        # stays long: one block per move, read as a list; each block is its move's offer
        out: list[Move] = []
        if _own_check(ev, "keep_values"):
            # the move's own check is the evidence: a pure call that a later loop over the
            # same range makes again with the same arguments
            out.append(Move(
                "keep_values", "keep_values", 2.0, 0.8,
                why="A later loop recomputes, call for call, a value an earlier loop over the "
                    "same range already computed (a score recomputed to exponentiate it): "
                    "the work of that call is done twice.",
                plan="Keep the value: the first loop stores each call's result in a row "
                     "buffer (on the stack, 32 KB; a longer range runs the code as it was) "
                     "and the later loop reads it back; a math function of it that opens "
                     "the later loop runs first as its own simd loop over the buffer, so it "
                     "vectorizes.",
                risks="none for the result (the same values, in the same order); the buffer "
                      "is a pass through L1"))
        if ev.facts.row_tiles:
            nest = ev.facts.row_tiles[0]
            # more rows first: each row of the tile shares the other operand's stream, the
            # traffic a matrix product is bound by; two output columns where the vector
            # registers hold them (measured on AVX-512: 8x2 beats 8x1 by 1.2x; with AVX2's
            # 16 registers 8x1 beats 8x2 by 1.2x), one where not
            for rank, (rows, cols) in enumerate(((8, 2), (8, 1))):
                out.append(Move(
                    "register_tile", "register_tile", 2.5, 0.75 - 0.1 * rank,
                    params={"rows": rows, "cols": cols},
                    why=f"A dot-product nest sits in a loop over rows ({nest}) and reads an "
                        "operand that does not depend on the row: every row streams all of "
                        "it again, and each loaded element serves one multiply-add.",
                    plan=f"Register-tile the rows and the outputs: {rows} rows x {cols} "
                         f"outputs share one pass of the inner reduction ({rows * cols} "
                         "accumulators under omp simd reduction), so each element of either "
                         "operand is loaded once per tile; leftover rows and outputs run the "
                         "original code.",
                    risks="register spills if the tile outgrows the vector registers; no gain "
                          "for a single row (a matrix-vector product)"))
        if _own_check(ev, "jam_sweeps"):
            # the move's own check is the evidence: a row loop whose body runs several
            # inner loops over the same columns (A^T(Ax), two mat-vecs sharing A), each
            # reading with unit stride
            for rank, factor in enumerate((4, 8)):
                out.append(Move(
                    "jam_sweeps", "jam_sweeps", 1.8, 0.7 - 0.1 * rank,
                    params={"factor": factor},
                    why="A row loop sweeps each row in more than one inner loop, or in one "
                        "that both sums and updates a vector: each row loads the shared "
                        "vectors again and each sum waits on its own add chain.",
                    plan=f"Jam {factor} rows into each pass of the inner loops: {factor} "
                         "sums per pass under omp simd reduction, the updated vector loaded "
                         "and stored once per pass with the rows' terms added in their "
                         "order; leftover rows run the loop as written.",
                    risks="register pressure at the larger factor; an `omp parallel for` "
                          "must come first (the merge threads, then jams)"))
        if ev.cores() > 1 and ev.serial() and _own_check(ev, "time_steps"):
            # the move's own check is the evidence: a sequential (time) loop around
            # independent loop nests. Where it applies it threads the same nests as
            # omp_parallel with one parallel region instead of one per nest per step, so it
            # ranks above omp_parallel (0.75): the merge takes it first (on a 250x250 Jacobi
            # 2D of 100 steps, omp_parallel's 200 regions per call ran slower than the
            # serial code at -O3)
            out.append(Move(
                "time_steps", "time_steps", 0.85 * ev.cores(), 0.85,
                why="A sequential time loop runs independent loop nests at each step (a "
                    "stencil over two arrays): threading each nest opens a parallel region "
                    "per nest per step.",
                plan="One parallel region around the time loop: every thread runs the steps, "
                     "each step's loops are `omp for` whose barriers keep the steps in "
                     "order; the serial nest where all the steps together do less than "
                     "OMP_MIN_WORK or a step less than OMP_MIN_WORK / 64 (its barriers).",
                risks="a barrier per loop per step; a step too small for two threads "
                      "(its work below the threshold) runs serial"))
        if _own_check(ev, "reciprocal"):
            # the move's own check is the evidence: a float division by a value the loop
            # does not change
            out.append(Move(
                "reciprocal", "reciprocal", 1.15, 0.5,
                why="A loop divides by a value it does not change (a row normalized by its "
                    "total): a vector division issues once every several cycles where a "
                    "multiply issues twice a cycle, and g++ keeps it without fast-math.",
                plan="Take the reciprocal once before the loop and multiply by it.",
                risks="the quotient is rounded twice (an ulp or so, inside the tolerance); a "
                      "divisor below ~3e-39 would overflow its reciprocal"))
        if _own_check(ev, "float_pow"):
            # the move's own check is the evidence: pow of a float into a float result
            out.append(Move(
                "float_pow", "float_pow", 1.4, 0.6,
                why="A float is raised to a small power with `pow`, which computes in "
                    "double: each element is converted to double and back, so the loop "
                    "vectorizes at half the float width or not at all.",
                plan="Write `pow(x, 2)` (or 3) as the product of the float with itself, in "
                     "float; the result went into a float anyway.",
                risks="the square is rounded to float before it is added (an ulp of the "
                      "square, inside a float tolerance)"))
        if _own_check(ev, "split_ranges"):
            # the move's own check is the evidence: a test of the counter against bounds
            # (padding, borders) that is linear in it
            out.append(Move(
                "split_ranges", "split_ranges", 1.5, 0.6,
                why="An inner loop tests its counter against bounds on every element "
                    "(padding, a border): the test costs as much as the work, and the loop "
                    "vectorizes only as a masked gather, if at all.",
                plan="Compute once before the loop the range where the test is decided and "
                     "run the loop as three: before it and after it as written, the middle "
                     "without the counter's comparisons.",
                risks="two more loops' set-up per pass (a division where the counter's "
                      "coefficient is not a constant); no gain where the middle is short"))
        if _own_check(ev, "vector_scan"):
            # the move's own check is the evidence: a float prefix sum that runs one
            # element per add latency
            out.append(Move(
                "vector_scan", "vector_scan", 1.6, 0.6,
                why="A prefix sum waits on one add per element (its running total's "
                    "dependence chain), so each core scans at about a quarter of an "
                    "element per cycle, whatever the vector width.",
                plan="Scan a vector at a time: the prefix of 8 floats (4 doubles) taken in "
                     "registers by shift-and-add steps, the running total added as one "
                     "broadcast, so the chain is one add per vector; leftover elements run "
                     "the loop as written. Inside threaded rows or scan blocks as well.",
                risks="a float sum is reassociated (inside the tolerance); no gain where one "
                      "core already saturates memory bandwidth"))
        return out

    def _chain_moves(self, ev: Evidence) -> list[Move]:
        """Dot-product nests jammed, reduction chains split into accumulators."""
        out: list[Move] = []
        if ev.facts.dot_nests:
            nest = ev.facts.dot_nests[0]
            for rank, factor in enumerate((4, 8)):
                out.append(Move(
                    "unroll_and_jam", "unroll_and_jam", 1.8, 0.7 - 0.1 * rank,
                    params={"factor": factor},
                    why=f"A nest ({nest}) does one outer step per pass of its inner loop: a "
                        "dot product per output (the elements every output shares loaded once "
                        "per output, one accumulator chain waiting on each add), or a row "
                        "added into a vector (the vector loaded and stored once per row).",
                    plan=f"Unroll-and-jam the outer loop by {factor}: {factor} outer steps "
                         "share one pass of the inner loop (outputs each with its own "
                         "accumulator under omp simd reduction; rows added in their order "
                         "into each element), so a shared element is loaded once for "
                         f"{factor} FMAs; leftover steps run the original loop.",
                    risks="register pressure at the larger factor; no gain when the nest is "
                          "bound by the stream of the other operand"))
        if ev.facts.chains:
            chain = ev.facts.chains[0]
            latency = ev.kind in (None, "compute-bound", "latency-bound")
            for rank, ways in enumerate((4, 8)):
                out.append(Move(
                    "accumulators", "accumulators", 1.6 if latency else 1.15,
                    (0.6 if latency else 0.35) - 0.1 * rank, params={"ways": ways},
                    why=f"The reduction {chain} is one floating-point dependence chain: even "
                        "vectorized, each add waits for the one before (3-4 cycles) while the "
                        "core could start two per cycle.",
                    plan=f"Give it {ways} accumulators: the range split into {ways} contiguous "
                         "parts walked side by side under `omp simd reduction`, so "
                         f"{ways} independent vector chains are in flight; the rest of the "
                         "range runs the original loop; the partial sums are added at the end.",
                    risks="the sum is reassociated (inside the tolerance); no gain when the "
                          "loop waits on memory"))
        return out

    def _simd_moves(self, ev: Evidence) -> list[Move]:
        """omp simd on the innermost loops (with reductions where the evidence found one),
        and unrolling of vectorized loops."""
        out: list[Move] = []
        if ev.facts.reductions:
            red = ev.facts.reductions[0]
            out.append(Move(
                "simd", "simd", 2.2, 0.75,
                why=f"The inner loop accumulates into a scalar ({red}): without reassociation "
                    "the adds form one serial dependence chain, one add per FP latency, and the "
                    "compiler will not vectorize it.",
                plan="Add `#pragma omp simd` with reduction clauses to the innermost loops, so "
                     "the reduction is split across vector lanes (and -fopenmp-simd/-fopenmp "
                     "is on).",
                risks="the sum is reassociated: results change in the last bits (well inside "
                      "the tolerance)"))
        else:
            vec = ev.vectorized()
            out.append(Move(
                "simd", "simd", 1.4 if vec is False else 1.1, 0.6 if vec is False else 0.4,
                why="The innermost loops are not vectorized; with omp simd g++ vectorizes "
                    "them without its cost model and alias checks." if vec is False else
                    "The innermost loops rely on the auto-vectorizer's cost model and alias "
                    "checks.",
                plan="Add `#pragma omp simd` to the innermost independent loops so they are "
                     "vectorized without runtime alias checks.",
                risks="vectorized calls to libm are not available: loops with exp/erf stay "
                      "scalar"))
        if ev.facts.simd or ev.vectorized():
            out.append(Move(
                "unroll", "unroll", 1.05, 0.3, params={"factor": 4},
                why="The vectorized inner loops are short-bodied: loop overhead and a single "
                    "accumulator chain limit throughput.",
                plan="Add `#pragma GCC unroll 4` to the innermost loops.",
                risks="code growth; no gain when memory-bound"))
        return out

    def _cuda_moves(self, ev: Evidence, ctx: AgentContext) -> list[Move]:
        out: list[Move] = launch_moves(ev, ctx)
        body = ev.kf.body if ev.kf is not None else ""
        out.append(Move(
            "grid_stride", "grid_stride", 1.1, 0.5,
            why="Each thread handles one element and the grid grows with the problem, so "
                "index math and block scheduling are paid per element.",
            plan="Turn the `if (i >= n) return;` kernels into grid-stride loops and cap the "
                 "grid at GRID_CAP blocks (a knob, about 8 blocks per SM), so each thread "
                 "handles several elements.",
            risks="fewer threads in flight if the cap is too low for the device"))
        regs = ev.registers
        out.append(Move(
            "launch_bounds", "launch_bounds", 1.1 if regs and regs > 64 else 1.04,
            0.5 if regs and regs > 64 else 0.35, params={"knob": "BLOCK"},
            why=(f"ptxas allocates {regs:.0f} registers per thread without knowing the block "
                 "size." if regs is not None else
                 "ptxas does not know the block size the kernels are launched with."),
            plan="Declare __launch_bounds__(BLOCK) on the kernels launched with block [BLOCK], "
                 "so register allocation targets that block size.",
            risks="spills if the kernel needs more registers than the bound allows"))
        if "for" in body:
            out.append(Move(
                "unroll", "unroll", 1.1, 0.4, params={"factor": 4},
                why="The per-thread inner loops issue one load at a time, leaving memory "
                    "latency exposed.",
                plan="Add `#pragma unroll 4` to the innermost loops so several loads are in "
                     "flight per thread.",
                risks="register pressure"))
        return out

    def _knobs(self, ev: Evidence, ctx: AgentContext) -> list[Move]:
        """Knob moves in the direction the evidence suggests. BLOCK takes one step at a
        time (occupancy says which way). Other knobs get a ladder of two values, both
        evaluated in one iteration (the coordinator makes the second an alternative of the
        first): x2 and x4 for unroll-like knobs, x2 and x8 for knobs whose effect is not
        known (a coarse bracket first, refined by the next step); thread counts stop at the
        cores. A knob moves at most MAX_KNOB_STEPS accepted steps in a run and stops when
        its last attempt lost, so the search cannot oscillate."""
        out = self._threshold(ev, ctx)
        for name, value in ev.knobs.items():
            if name in _NOT_MINE or not isinstance(value, int) or value < 1:
                continue
            if ev.kf is not None and name not in ev.kf.body and not any(
                    name in str(x) for lc in ev.kf.meta.launch for x in lc.block + lc.grid):
                continue  # the source does not use it
            if _knob_steps(ctx, name) >= MAX_KNOB_STEPS:
                continue
            occ = ev.occupancy_pct
            if name == "BLOCK":
                if occ is not None and occ < 50 and value > 64:
                    new, why = value // 2, (f"Blocks of {value} threads at {occ:.0f}% "
                                            "theoretical occupancy: smaller blocks let more "
                                            "blocks fit per SM.")
                elif value < 512 and (occ is None or occ >= 50):
                    new, why = value * 2, (f"Blocks of {value} threads"
                                           + (f" at {occ:.0f}% theoretical occupancy"
                                              if occ is not None else "")
                                           + ": larger blocks keep more loads in flight per SM.")
                else:
                    continue
                ladder = [new]
            elif "THREAD" in name:
                cores = ev.cores()
                if value >= cores:
                    continue
                ladder = [min(value * 2, cores)] + ([cores] if value * 2 < cores else [])
                why = (f"{name}={value} of {cores} cores: more threads share the rows.")
            elif any(w in name for w in ("UNROLL", "VEC", "ELEMS", "PER_THREAD", "ACC")):
                cap = 8 if ev.kind == "memory-bound" else 16
                if value >= cap:
                    continue
                ladder = [v for v in (value * 2, value * 4) if v <= cap]
                why = (f"{name}={value}: more independent work per iteration (more "
                       "accumulators or loads in flight) hides latency.")
            else:
                ladder = [value * 2, value * 8]
                why = (f"{name}={value}: the knob's effect is not known; a coarse bracket "
                       "first (x2 and x8), refined by the next step.")
            for rank, new in enumerate(ladder):
                out.append(Move("knobs", f"knob:{name}", 1.08, 0.4 - 0.05 * rank,
                                type="knobs", params={"values": {name: new}}, why=why,
                                plan=f"Set {name} {value} -> {new}.",
                                risks="the best value depends on the shape; other shapes may "
                                      "lose"))
        return out

    def _threshold(self, ev: Evidence, ctx: AgentContext) -> list[Move]:
        """OMP_MIN_WORK down a ladder. Where each inner iteration is heavy (a math function
        per element, libm's or an inline one) two rungs (/4, /16): the default threshold,
        sized for a load and an add per iteration, keeps mid-size shapes of such a loop on
        one core though thread start-up (microseconds) is paid back many times over. A loop
        of loads and adds gets one rung (/4), still tens of microseconds of work per thread:
        a shape a little under the threshold (a group between the typical sizes) gains the
        second core's bandwidth too. The gate times every group, so a rung that costs a
        small shape more than it gains a larger one is not accepted. Not after a threaded
        attempt regressed a group (that raises the threshold instead)."""
        value = ev.knobs.get("OMP_MIN_WORK")
        body = ev.kf.body if ev.kf is not None else ""
        heavy = bool(ev.facts.math_calls) or re.search(r"\bkc_\w+f\s*\(", body) is not None
        if not isinstance(value, int) or value < (1 << 16 if heavy else 1 << 18) or \
                "OMP_MIN_WORK" not in body or ev.cores() < 2 or _threading_regressed(ctx) \
                or _knob_steps(ctx, "OMP_MIN_WORK") >= (MAX_KNOB_STEPS if heavy else 1):
            return []
        if heavy:
            why = ("each iteration here computes a math function (tens of operations), so "
                   "far less work pays for starting the threads.")
            rungs = (value // 4, value // 16)
        else:
            why = ("a quarter of it is still tens of microseconds per thread, and a shape "
                   "just under it would gain the second core's bandwidth too.")
            rungs = (value // 4,)
        return [Move("knobs", "knob:OMP_MIN_WORK", 1.15 if heavy else 1.05,
                     0.4 - 0.05 * rank if heavy else 0.25, type="knobs",
                     params={"values": {"OMP_MIN_WORK": new}},
                     why=f"OMP_MIN_WORK={value} keeps loops below {value} iterations on one "
                         f"core, but {why}",
                     plan=f"Set OMP_MIN_WORK {value} -> {new}.",
                     risks="small shapes just above the new threshold may pay more for the "
                           "threads than they gain")
                for rank, new in enumerate(rungs)]

    def fallbacks(self, transform: str, params: dict, ev: Evidence):
        if transform == "unroll" and int(params.get("factor", 4)) > 2:
            return [("unroll", {"factor": 2}, "unroll by 2 instead")]
        return []
