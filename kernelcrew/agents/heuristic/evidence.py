"""What the heuristic specialists decide from: the profile's numbers when there is a
profile, the kernel's own source (static analysis) when there is not."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field

from kernelcrew.agents.context import AgentContext
from kernelcrew.agents.transforms import entries, parse_any
from kernelcrew.agents.transforms.analysis.dependence import check_loop
from kernelcrew.agents.transforms.analysis.dot_nests import jam_reason
from kernelcrew.agents.transforms.cpu.accumulators import accum_reason
from kernelcrew.agents.transforms.cpu.register_tile import tile_reason
from kernelcrew.agents.transforms.views import canonical
from kernelcrew.csource.affine import FunctionModel, p_str, split_terms
from kernelcrew.csource.syntax import Source, find_function, params, pragma_text, walk
from kernelcrew.errors import InputError
from kernelcrew.kernels.kernelfile import KernelFile
from kernelcrew.results import ProfileResult


def _metric(p: ProfileResult | None, *names: str) -> tuple[float | None, str]:
    if p is None:
        return None, ""
    for n in names:
        m = p.metrics.get(n)
        if m is not None and m.value is not None:
            return float(m.value), m.reason
    for n in names:
        m = p.metrics.get(n)
        if m is not None:
            return None, m.reason
    return None, ""


@dataclass
class StaticFacts:
    """What the source itself says, per entry function."""

    loops: int = 0
    top_loops: int = 0
    threaded: bool = False  # an omp parallel / omp for pragma
    simd: bool = False
    strided: list[str] = field(default_factory=list)  # "b[q * n + j] (stride n in q)"
    reductions: list[str] = field(default_factory=list)  # scalars accumulated in inner loops
    math_calls: list[str] = field(default_factory=list)
    restrict_missing: bool = False
    dot_nests: list[str] = field(default_factory=list)  # "o over i at line N" (jammable)
    row_tiles: list[str] = field(default_factory=list)  # "t around o over i at line N"
    chains: list[str] = field(default_factory=list)  # reductions that can take accumulators
    not_applicable: dict[str, str] = field(default_factory=dict)  # move -> why not, from source


def static_facts(kf: KernelFile) -> StaticFacts:
    f = StaticFacts()
    off = kf.text[: len(kf.text) - len(kf.body)].count("\n")  # report lines of the file
    for name in entries(kf):
        # a nest split across a helper call or walked with `*p++` is seen whole (the moves
        # work on the same views)
        s = Source(canonical(kf.body, name))
        fn = find_function(s, name)
        if fn is None:
            continue
        m = FunctionModel(s, fn)
        f.loops += len(m.loops)
        f.top_loops += len(m.forest)
        f.restrict_missing |= any(p.pointer is not None and not p.restrict for p in params(fn))
        for n in walk(fn):
            if n.type == "preproc_call":
                t = pragma_text(s, n)
                f.threaded |= bool(re.match(r"omp\s+(parallel|for)\b", t))
                f.simd |= bool(re.match(r"omp\b.*\bsimd\b", t))
            elif n.type == "call_expression":
                callee = s.text_of(n.child_by_field_name("function")).replace("std::", "")
                if re.fullmatch(r"(exp|erf|log|tanh|sqrt|pow|sin|cos)f?", callee):
                    f.math_calls.append(callee)
        for lp in m.loops:
            if len(lp.children) == 1 and len(lp.children[0].children) == 1 and \
                    not lp.children[0].children[0].children:
                why = tile_reason(m, lp)
                if why is None:
                    y = lp.children[0]
                    f.row_tiles.append(f"{lp.var} around {y.var} over {y.children[0].var} "
                                       f"at line {s.line_of(lp.node) + off}")
                else:
                    f.not_applicable.setdefault("register_tile", why)
            if len(lp.children) == 1 and not lp.children[0].children:
                why = jam_reason(m, lp)
                if why is None:
                    f.dot_nests.append(f"{lp.var} over {lp.children[0].var} at line "
                                       f"{s.line_of(lp.node) + off}")
                else:
                    f.not_applicable.setdefault("unroll_and_jam", why)
            if lp.children or not lp.canonical:
                continue
            why_not = accum_reason(m, lp)
            if why_not is None:
                f.chains.append(f"at line {s.line_of(lp.node) + off}")
            else:
                f.not_applicable.setdefault("accumulators", why_not)
            v = check_loop(m, lp, allow_reductions=True)
            f.reductions += [f"{k} ({op}) at line {s.line_of(lp.node) + off}"
                             for k, op in v.reductions.items()]
            for n in walk(lp.body):
                if n.type != "subscript_expression":
                    continue
                acc = m.subscript(n, lp.node)
                if acc is None or acc[1] is None or (sp := split_terms(acc[1])) is None:
                    continue
                coef = sp[0].get(lp.key)
                if coef is not None and coef != {(): 1}:
                    f.strided.append(f"{s.text_of(n)} (stride {p_str(coef)} in {lp.var}, "
                                     f"line {s.line_of(lp.node) + off})")
    f.math_calls = sorted(set(f.math_calls))
    return f


@dataclass
class Evidence:
    """The numbers a specialist cites, with where they came from."""

    backend: str
    kf: KernelFile | None
    facts: StaticFacts
    profiled: bool
    kind: str | None = None  # memory-bound | compute-bound | latency-bound | launch-bound
    diagnosis: str = ""
    case: str = ""
    bandwidth_pct: float | None = None
    achieved_gbps: float | None = None
    peak_gbps: float | None = None
    compute_pct: float | None = None
    threads: float | None = None
    threads_available: float | None = None
    stride: float | None = None
    stride_note: str = ""
    vector_bytes: float | None = None
    vector_note: str = ""
    registers: float | None = None
    occupancy_pct: float | None = None
    block_threads: float | None = None
    spill_bytes: float | None = None
    launches: float | None = None
    register_choice: float | None = None  # index in (block, launch_bounds, maxrregcount)
    register_choice_value: float | None = None
    register_choice_note: str = ""
    time_ms: float | None = None
    access: str = "unknown"  # the profiler's verdict on the hot loops' strides
    hot: str = ""
    _hot: list = field(default_factory=list)  # the profile's hot regions

    @property
    def flags(self) -> list[str]:
        return list(self.kf.meta.flags) if self.kf is not None else []

    @property
    def knobs(self) -> dict[str, int | float]:
        return dict(self.kf.meta.knobs) if self.kf is not None else {}

    def serial(self) -> bool:
        if self.threads is not None:
            return self.threads <= 1
        return not self.facts.threaded

    def cores(self) -> int:
        if self.threads_available:
            return int(self.threads_available)
        try:  # agents do not import tools: ask the OS, as the CPU backend does
            return len(os.sched_getaffinity(0))
        except AttributeError:
            return os.cpu_count() or 1

    def memory_bound(self) -> bool:
        return self.kind == "memory-bound"

    def vectorized(self) -> bool | None:
        return None if self.vector_bytes is None else self.vector_bytes > 0

    def headline(self) -> str:
        """One sentence with the numbers that matter, or the static facts."""
        if not self.profiled:
            bits = [f"no profile: from the source, {self.facts.loops} loop(s)"]
            bits.append("threaded" if self.facts.threaded else "single-threaded")
            if self.facts.strided:
                bits.append(f"strided access {self.facts.strided[0]}")
            if self.facts.reductions:
                bits.append(f"serial reduction on {self.facts.reductions[0]}")
            return ", ".join(bits) + "."
        parts = [f"{self.kind or 'unclassified'} on {self.case}" if self.case
                 else f"{self.kind or 'unclassified'}"]
        if self.achieved_gbps is not None and self.peak_gbps:
            parts.append(f"{self.achieved_gbps:.1f} of {self.peak_gbps:.1f} GB/s"
                         + (f" ({self.bandwidth_pct:.0f}% of peak)"
                            if self.bandwidth_pct is not None else ""))
        elif self.bandwidth_pct is not None:
            parts.append(f"{self.bandwidth_pct:.0f}% of peak bandwidth")
        if self.compute_pct is not None:
            parts.append(f"{self.compute_pct:.0f}% of peak FLOP/s")
        if self.backend == "cpu" and self.threads is not None:
            parts.append(f"{self.threads:.0f} of {self.cores()} threads")
        if self.registers is not None:
            parts.append(f"{self.registers:.0f} registers/thread")
        if self.occupancy_pct is not None:
            parts.append(f"{self.occupancy_pct:.0f}% theoretical occupancy")
        return ": ".join([parts[0], ", ".join(parts[1:])]) + "." if len(parts) > 1 \
            else parts[0] + "."

    def access_sentence(self) -> str:
        """Stride / vectorization of the hot loop, one sentence ('' when nothing known)."""
        bits = []
        if self.stride is not None and self.stride > 1:
            bits.append(f"has stride {self.stride:.0f} elements ({self.stride_note})"
                        if self.stride_note else f"has stride {self.stride:.0f} elements")
        elif self.facts.strided:
            bits.append(f"has strided access {self.facts.strided[0]}")
        if self.vector_bytes is not None:
            bits.append(f"is vectorized with {self.vector_bytes:.0f}-byte vectors"
                        if self.vector_bytes > 0 else
                        f"is not vectorized ({self.vector_note or 'compiler report'})")
        if self.libm_share:
            bits.append(f"spends {self.libm_share}")
        return ("The hot loop " + " and ".join(bits) + ".") if bits else ""

    @property
    def libm_share(self) -> str:
        """'55% of samples in libm erff, 21% in expf' from the profile's hot regions."""
        parts = [f"{h.share:.0%} of samples in {h.where.split(' called')[0]}"
                 for h in self._hot if "libm" in h.where and h.share]
        return ", ".join(parts)


def evidence(ctx: AgentContext) -> Evidence:
    try:
        kf = parse_any(ctx.kernel)
    except InputError:
        kf = None
    facts = static_facts(kf) if kf is not None else StaticFacts()
    p = ctx.profile
    ev = Evidence(backend=ctx.backend, kf=kf, facts=facts, profiled=p is not None)
    if p is None:
        return ev
    ev.kind = p.bottleneck.kind
    ev.diagnosis = p.bottleneck.evidence
    ev.access = getattr(p.bottleneck, "access_pattern", "unknown") or "unknown"
    ev.case = p.case
    ev.bandwidth_pct, _ = _metric(p, "bandwidth_pct", "dram_throughput_pct")
    if ev.bandwidth_pct is None and p.roofline and p.roofline.bandwidth_share is not None:
        ev.bandwidth_pct = p.roofline.bandwidth_share * 100
    ev.achieved_gbps, _ = _metric(p, "achieved_bandwidth")
    ev.peak_gbps, _ = _metric(p, "peak_bandwidth")
    if p.roofline is not None:
        ev.achieved_gbps = ev.achieved_gbps if ev.achieved_gbps is not None \
            else p.roofline.achieved_gbps
        ev.peak_gbps = ev.peak_gbps or p.roofline.peak_gbps
    ev.compute_pct, _ = _metric(p, "compute_pct")
    if ev.compute_pct is None and p.roofline and p.roofline.compute_share is not None:
        ev.compute_pct = p.roofline.compute_share * 100
    ev.threads, _ = _metric(p, "threads_busy", "threads_launched")
    ev.threads_available, _ = _metric(p, "threads_available")
    ev.stride, ev.stride_note = _metric(p, "hot_loop_stride")
    ev.vector_bytes, ev.vector_note = _metric(p, "hot_loop_vector_bytes")
    ev.registers, _ = _metric(p, "registers_per_thread")
    ev.occupancy_pct, _ = _metric(p, "theoretical_occupancy_pct", "achieved_occupancy_pct")
    ev.block_threads, _ = _metric(p, "block_threads")
    ev.spill_bytes, _ = _metric(p, "spill_stores_bytes")
    ev.launches, _ = _metric(p, "launches")
    ev.register_choice, ev.register_choice_note = _metric(p, "register_choice")
    ev.register_choice_value, _ = _metric(p, "register_choice_value")
    ev.time_ms, _ = _metric(p, "time_ms")
    ev._hot = list(p.hot_regions)
    if p.hot_regions:
        h = p.hot_regions[0]
        ev.hot = f"{h.where}" + (f" ({h.share:.0%} of samples)" if h.share is not None else "")
    return ev
