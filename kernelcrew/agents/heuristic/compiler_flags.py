"""compiler_flags: the optimization level, target ISA, math and unrolling flags, and the
compiler itself (CPU: clang++ and clang++ with Polly beside g++, each with its own flags,
raced like any other change); -O3 and register caps from ptxas resources (CUDA)."""

from __future__ import annotations

import functools
import re

from kernelcrew.agents.context import AgentContext
from kernelcrew.agents.heuristic.base import (
    HeuristicSpecialist,
    Move,
    blocked,
    kind_parts,
    tried_kinds,
)
from kernelcrew.agents.heuristic.cuda_moves import register_moves
from kernelcrew.agents.heuristic.evidence import Evidence
from kernelcrew.agents.transforms.cpu import compiler


@functools.cache
def cpu_isa() -> frozenset[str]:
    """The host CPU's feature flags (empty where /proc/cpuinfo is not readable)."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    return frozenset(line.split(":", 1)[1].split())
    except OSError:
        pass
    return frozenset()



def raced_rungs(tried: dict[str, str]) -> set[str]:
    """The parts of every change evaluated on this run, merges included: a compiler rung
    raced inside a merged kernel is not proposed again. A merge that did not compile did
    not race its rung (the compiler may have failed on another part, or crashed, as Polly
    does on some threaded nests): the rung is proposed again, once, on the current kernel
    alone (`alone`, which the coordinator races as it is, outside the merge)."""
    failed: dict[str, int] = {}
    out: set[str] = set()
    for kind, outcome in tried.items():
        for part in kind_parts(kind):
            if outcome == "compile-error":
                failed[part] = failed.get(part, 0) + 1
            else:
                out.add(part)
    return out | {part for part, n in failed.items() if n > 1}

class CompilerFlags(HeuristicSpecialist):
    name = "compiler_flags"
    field = "compiler flags: optimization level, -march, math and unroll flags, register caps"

    def moves(self, ctx: AgentContext, ev: Evidence) -> list[Move]:
        return self._cuda_moves(ev, ctx) if ev.backend == "cuda" else self._cpu_moves(ctx, ev)

    def _cpu_moves(self, ctx: AgentContext, ev: Evidence) -> list[Move]:
        flags = ev.flags
        out: list[Move] = []
        add = []
        if not any(f in flags for f in ("-O3", "-Ofast")):
            add.append("-O3")
        if "-march=native" not in flags:
            add.append("-march=native")
        if ev.facts.math_calls and "-fno-math-errno" not in flags and "-ffast-math" not in flags:
            add.append("-fno-math-errno")
        if add:
            vec = ev.vectorized()
            gain = 1.3 if vec is False or "-march=native" in add else 1.1
            why = ("The code is built with " + " ".join(flags or ["default flags"])
                   + ": -O2 vectorizes only with the very-cheap cost model, and without -march "
                   "only with SSE2." if "-O3" in add else
                   "The code is built for the baseline ISA; the host has wider vectors.")
            if "-fno-math-errno" in add:
                why = why.rstrip(".") + f", and errno handling in {', '.join(ev.facts.math_calls)}"\
                    " blocks inlining."
            out.append(Move(
                "flags", "flags", gain, 0.75, why=why, type="flags", params={"add": add},
                plan=f"Compile with {' '.join(add)} (kept: {' '.join(flags) or 'none'}): -O3 "
                     "enables the loop vectorizer and more unrolling, -march=native the host's "
                     "AVX2/AVX-512 and FMA" + (", -fno-math-errno lets sqrt/exp inline"
                                               if "-fno-math-errno" in add else "") + ".",
                risks="FMA contraction changes rounding slightly (well within the op tolerance); "
                      "the binary only runs on this CPU family."))
        pragmas = ev.kf.body if ev.kf is not None else ""
        if re.search(r"#\s*pragma\s+omp\s+(parallel|for)", pragmas) and "-fopenmp" not in flags:
            out.append(Move(
                "flags", "flags:openmp", float(max(1.3, 0.8 * ev.cores())), 0.8,
                why="The source has OpenMP pragmas but is compiled without -fopenmp, so they are "
                    "ignored and the kernel runs on one thread.",
                plan="Add -fopenmp so the parallel pragmas take effect.",
                risks="none beyond the pragmas' own correctness", params={"add": ["-fopenmp"]},
                type="flags"))
        if "-funroll-loops" not in flags and ("-O3" in flags or "-Ofast" in flags) and \
                ev.kind in (None, "compute-bound", "latency-bound"):
            out.append(Move(
                "flags", "flags:unroll", 1.05, 0.35,
                why="Loop overhead and short dependence chains in the inner loops limit "
                    "instruction-level parallelism.",
                plan="Add -funroll-loops so g++ unrolls loops whose trip count it can compute.",
                risks="larger code; can be slower when loops are short", type="flags",
                params={"add": ["-funroll-loops"]}))
        out += self._compiler_moves(ctx, ev)
        if "-march=native" in flags and "avx512f" in cpu_isa() and \
                not any(f.startswith("-mprefer-vector-width") for f in flags) and \
                ev.vector_bytes == 32 and ev.kind == "compute-bound":
            out.append(Move(
                "flags", "flags:vector-width", 1.15, 0.4,
                why=f"The hot loop uses 32-byte vectors on a CPU with AVX-512 "
                    f"({ev.compute_pct or 0:.0f}% of peak FLOP/s).",
                plan="Add -mprefer-vector-width=512 so the vectorizer uses 64-byte vectors.",
                risks="AVX-512 frequency drops on some CPUs can cancel the gain", type="flags",
                params={"add": ["-mprefer-vector-width=512"]}))
        return out

    def _compiler_moves(self, ctx: AgentContext, ev: Evidence) -> list[Move]:
        """clang++ with Polly, then clang++, as rungs beside g++ from a kernel g++ builds,
        one per iteration (the coordinator builds the iteration's merged kernel with it
        too): each only where the `compiler` move applies (installed, and not clang++
        alone on threading pragmas it would build as serial code); a missing compiler is
        not proposed, and `not_applicable` says why."""
        kf = ev.kf
        if kf is None or (kf.meta.compiler or "g++").startswith("clang"):
            return []
        out: list[Move] = []
        if compiler.refusal(kf, "clang++", True) is None:
            out.append(Move(
                "compiler", "compiler:polly", 1.15, 0.3, type="flags",
                params={"cc": "clang++", "polly": True},
                why="Loop nests over arrays are what a polyhedral optimizer tiles, "
                    "interchanges, vectorizes on the outer loop and threads.",
                plan="Build with clang++ and Polly: -O3 -march=native -mllvm=-polly "
                     "-mllvm=-polly-parallel -mllvm=-polly-vectorizer=stripmine (threads "
                     "on GCC's libgomp).",
                risks="Polly ignores the source's own OpenMP pragmas; the export names "
                      "clang++ with Polly's flags"))
        if compiler.refusal(kf, "clang++", False) is None:
            out.append(Move(
                "compiler", "compiler:clang++", 1.1, 0.3, type="flags",
                params={"cc": "clang++", "polly": False},
                why="Another compiler vectorizes and if-converts differently: clang's loop "
                    "vectorizer takes conditional loads (masked) and loops g++ leaves scalar.",
                plan="Build the same code with clang++ -O3 -march=native.",
                risks="the export then names clang++ as the compiler the code needs"))
        # one compiler rung per iteration (the coordinator races it on the iteration's
        # merged kernel, beside it): the next one once this one was tried
        tried = tried_kinds(ctx)
        raced = raced_rungs(tried)
        out = [mv for mv in out if not blocked(mv.kind, tried) and mv.kind not in raced][:1]
        for mv in out:
            if any(mv.kind in kind_parts(k) for k, o in tried.items() if o == "compile-error"):
                # its merge did not build: raced on the current kernel alone this time
                mv.params = {**mv.params, "alone": True}
        return out

    def _cuda_moves(self, ev: Evidence, ctx: AgentContext) -> list[Move]:
        flags = ev.flags
        out: list[Move] = []
        if "-O3" not in flags:
            out.append(Move("flags", "flags", 1.05, 0.5, type="flags", params={"add": ["-O3"]},
                            why="Device code is built without -O3.",
                            plan="Add -O3 (nvcc passes it to the device compiler).",
                            risks="none expected"))
        regs, occ = ev.registers, ev.occupancy_pct
        current = next((int(f.split("=")[1]) for f in flags if "maxrregcount" in f), None)
        choice = self._register_choice(ev)
        if choice is not None:
            out.append(choice)
        elif regs is not None and regs > 64 and (occ is None or occ < 50) and \
                not ev.spill_bytes:
            cap = 64 if regs <= 96 else 96 if regs <= 128 else 128
            if current is None or cap < current:
                out.append(Move(
                    "flags", "flags:maxrregcount", 1.15, 0.45, type="flags",
                    params={"add": [f"-maxrregcount={cap}"]},
                    why=f"{regs:.0f} registers per thread limit occupancy to "
                        f"{occ if occ is not None else 0:.0f}%.",
                    plan=f"Cap registers with -maxrregcount={cap} so more warps fit per SM and "
                         "hide memory latency.",
                    risks="spills to local memory if the kernel needs more registers; ptxas "
                          "reports them"))
        if current is not None and ev.spill_bytes:
            out.append(Move(
                "flags", "flags:maxrregcount", 1.1, 0.5, type="flags",
                params={"remove": [f for f in flags if "maxrregcount" in f]},
                why=f"The register cap {current} makes ptxas spill {ev.spill_bytes:.0f} bytes.",
                plan="Remove -maxrregcount so the kernel keeps its values in registers.",
                risks="lower occupancy"))
        return out + register_moves(ev, ctx)

    def _register_choice(self, ev: Evidence) -> Move | None:
        """Case 4.2: the profile ranked smaller blocks, launch bounds with a min-blocks value
        and a register cap by ptxas registers, spills and the occupancy table (measured
        occupancy from ncu when there is one); propose the winner."""
        if ev.register_choice is None or ev.register_choice_value is None:
            return None
        how, value = int(ev.register_choice), int(ev.register_choice_value)
        why = f"Occupancy is limited by registers ({ev.register_choice_note[:400]})."
        risks = "fewer registers per thread can mean spills or more instructions"
        if how == 0:
            return Move("knobs", "register_pressure", 1.15, 0.5, type="knobs",
                        params={"values": {"BLOCK": value}}, why=why, risks=risks,
                        plan=f"Smaller blocks: BLOCK -> {value}, so more blocks of the "
                             "register-heavy kernel fit per SM.")
        if how == 1:
            return Move("launch_bounds", "register_pressure", 1.15, 0.5,
                        params={"knob": "BLOCK", "min_blocks": value}, why=why, risks=risks,
                        plan=f"Declare __launch_bounds__(BLOCK, {value}) so ptxas keeps the "
                             f"kernel to the registers that {value} resident blocks per SM "
                             "allow.")
        return Move("flags", "register_pressure", 1.1, 0.5, type="flags",
                    params={"add": [f"-maxrregcount={value}"]}, why=why, risks=risks,
                    plan=f"Cap registers at {value} with -maxrregcount.")

    def fallbacks(self, transform: str, params: dict, ev: Evidence):
        add = [f for f in params.get("add", []) if f != "-march=native"]
        if transform == "flags" and add != list(params.get("add", [])) and add:
            return [("flags", {"add": add}, "without -march=native")]
        return []
