"""The CPU profiler: time, roofline, vectorization, access strides, perf, hot regions.

Every run of the kernel goes through the harness's sandboxed worker. Steps:
1. time the kernel on the chosen case (bench mode, the harness's own timer);
2. if `perf record` works here (software `cpu-clock` sampling works in most VMs), run the
   worker again under it with a `-g` build (g++ emits the same code with or without
   `-g`) and map the samples in the kernel's library to source lines with addr2line;
   otherwise rank the innermost loops by their static trip counts (an estimate, and
   labelled as one);
3. if hardware counters are supported (`perf stat`), count them over two runs with
   different repetition counts and keep the difference per call;
4. compile once more with `-fopt-info-vec-optimized-missed` for the vectorization report,
   and read the source's loops and subscripts (cpu_source).
"""

from __future__ import annotations

import math
import re
import shutil
from collections import Counter
from dataclasses import dataclass

from kernelcrew.kernels.kernelfile import KernelFile
from kernelcrew.kernels.spec import DTYPES, Case, OpSpec
from kernelcrew.results import CompileResult, Diagnosis, HotRegion, Metric, ProfileResult, Roofline
from kernelcrew.tools.backends.cpu import CpuBackend, cpu_threads
from kernelcrew.tools.backends.peaks import CpuPeaks, cpu_peaks
from kernelcrew.tools.config import BenchSettings, Limits
from kernelcrew.tools.judge.harness import Harness, KernelRun
from kernelcrew.tools.judge.judge import timing_floor
from kernelcrew.tools.locks import bench_lock
from kernelcrew.tools.observe.cpu_source import (
    Loop,
    analyze,
    apply_vec_report,
    loop_at,
    size_values,
)
from kernelcrew.tools.observe.perf import (
    PERF_FREQ_HZ,
    PERF_MAX_REPS,
    PERF_TARGET_S,
    Samples,
    count_events,
    hit_ratio_pct,
    perf_exe,
    perf_samples,
    perf_support,
)
from kernelcrew.tools.observe.summary import (
    Fields,
    ProfileFailed,
    Say,
    diagnose,
    render_summary,
    roofline,
    share_of,
)
from kernelcrew.tools.observe.vecreport import vec_report

# A ctypes call plus an OpenMP fork/join cost microseconds, and the judge does not resolve a
# call shorter than its timing floor (each call is timed by the parent, from continuing the
# worker to seeing it stopped): what it reads for a shorter call is mostly the round trip's
# jitter over its least (tens of us, more on a loaded machine or when an OpenMP team is
# woken). The floor is the backend's, raised where this session's calls of nothing jitter
# more (judge.timing_floor): the profile's launch-bound threshold is the same floor.
LAUNCH_BOUND_MS = CpuBackend.timing_floor_ms


# -- the profile -----------------------------------------------------------------------
class _ThreadsBackend(CpuBackend):
    """The CPU backend with the kernel's OpenMP thread count pinned."""

    def __init__(self, threads: int) -> None:
        self.threads = threads

    def worker_env(self) -> dict[str, str]:
        return {**super().worker_env(), "OMP_NUM_THREADS": str(self.threads)}


@dataclass
class _Measured:
    """What the sandboxed worker gave: the timed run, perf's samples and counters."""

    run: KernelRun
    t_ms: float
    floor_ms: float  # the least time the clock resolves in this session (judge.timing_floor)
    cache: str
    samples: Samples | None
    hot_reason: str  # why there are no samples, where there are none
    counters: dict[str, float | None]
    counters_reason: str


@dataclass
class _Hot:
    """Where the time goes: hot regions, the loops they fall in, threads busy."""

    regions: list[HotRegion]
    focus: list[Loop]  # the loops the evidence is about, hottest first
    method: str
    busy: int | None


def profile_cpu(spec: OpSpec, kf: KernelFile, case: Case, *, bench: BenchSettings | None = None,
                limits: Limits | None = None, threads: int | None = None,
                say: Say | None = None) -> ProfileResult:
    say = say or (lambda _m: None)
    threads_avail = cpu_threads()
    be = _ThreadsBackend(min(threads, threads_avail)) if threads else CpuBackend()
    bench = bench or BenchSettings()
    comp = be.compile(kf, spec)
    if not comp.ok:
        raise ProfileFailed(f"{kf.path or 'kernel'}: does not compile: {comp.reason}"
                            + (f": {comp.messages[0].message}" if comp.messages else ""))
    say("peaks (measured once per machine)")
    peaks = cpu_peaks()
    openmp = "-fopenmp" in kf.meta.flags
    launched = (min(threads, threads_avail) if threads else threads_avail) if openmp else 1
    got = _measure(spec, kf, case, be, comp, bench, limits, say)
    say("vectorization report")
    vec, vec_reason = vec_report(kf)
    loops = analyze(kf.text, entry=kf.meta.entry, values=size_values(kf, spec, case.sizes))
    apply_vec_report(loops, vec)
    hot = _hot_regions(got, loops, kf.text.splitlines())
    roof, diag = _roofline_and_diagnosis(spec, kf, case, bench, got, hot, peaks, launched)
    m = {"device": Metric(value=None, unit="", reason=be.describe()),
         **_timing_metrics(case, got, roof, peaks, spec.written_share(case.sizes)),
         **_thread_metrics(launched, threads_avail, openmp, hot, got.hot_reason),
         **_source_metrics(hot.focus, vec_reason, got.samples, hot.method, got.hot_reason),
         **_counter_metrics(got.counters, got.counters_reason)}
    fields = _summary_fields(roof, got, hot, m, launched, threads_avail, openmp, vec_reason)
    return ProfileResult(op=spec.name, kernel=str(kf.path or "<memory>"), backend="cpu",
                         case=f"{case.group}[{case.index}] {case.label}", source="cpu",
                         cache=got.cache,
                         summary=render_summary(fields), metrics=m, bottleneck=diag,
                         roofline=roof, hot_regions=hot.regions,
                         compile_report=_vec_lines(loops, vec_reason))


def _measure(spec: OpSpec, kf: KernelFile, case: Case, be: CpuBackend, comp: CompileResult,
             bench: BenchSettings, limits: Limits | None, say: Say) -> _Measured:
    """Time the kernel, then sample it with perf record and count events with perf stat
    where this machine allows, all in one harness under the machine-wide bench lock."""
    support = perf_support()
    exe = perf_exe()
    samples: Samples | None = None
    hot_reason = ""
    counters: dict[str, float | None] = {}
    with Harness(spec, be, cases=[case], bench=bench, limits=limits) as h:
        say(f"inputs and references for {case.group}[{case.index}] ({case.label})")
        h.data(case)
        cache = h.cache_state(case)
        with bench_lock():
            say(f"timing ({bench.reps} runs)")
            run = h.run(comp, kf)
            _require_correct(run, kf)
            t_ms = run.rows[0].median_ms
            if t_ms is None:
                raise ProfileFailed("no timed runs to profile (reps must be at least 1)")
            if support.record and exe:
                reps = max(3, min(PERF_MAX_REPS, math.ceil(PERF_TARGET_S * 1e3 / max(t_ms, 1e-3))))
                say(f"perf record ({reps} runs)")
                samples, hot_reason = _record(h, be, spec, kf, exe, reps)
            else:
                hot_reason = support.record_reason
            if support.events and exe:
                say("perf stat counters")
                reps = max(5, min(PERF_MAX_REPS, math.ceil(0.2e3 / max(t_ms, 1e-3))))
                counters = count_events(h, comp, kf, support.events, exe, reps)
    return _Measured(run, t_ms, timing_floor(h, run), cache, samples, hot_reason, counters,
                     support.counters_reason or ("counting failed" if not counters else ""))


def _hot_regions(got: _Measured, loops: list[Loop], lines: list[str]) -> _Hot:
    """The hot regions from perf's samples, else the innermost loops by trip count."""
    samples = got.samples
    if samples is not None and samples.kernel:
        hot, hot_loops = _sampled_hot(samples, loops, lines)
        method = (f"perf record cpu-clock samples ({samples.kernel} in the kernel's code; "
                  f"OpenMP runtime {samples.runtime} more)")
    else:
        if samples is not None and not got.hot_reason:
            got.hot_reason = "no samples (calls too short)"
        hot, hot_loops = _static_hot(loops, lines)
        method = ("static estimate: innermost loops ranked by trip counts"
                  + (f" ({got.hot_reason})" if got.hot_reason else ""))
    # the innermost loops carry the work (and the compiler's vectorization decision); an
    # outer loop only counts when no inner loop was hot
    focus = ([lp for lp in hot_loops if lp.innermost] or hot_loops
             or [lp for lp in loops if lp.innermost])
    busy = None
    if samples is not None and samples.threads:
        top = max(samples.threads.values())
        busy = sum(1 for n in samples.threads.values() if n >= 0.1 * top)
    return _Hot(hot, focus, method, busy)


def _roofline_and_diagnosis(spec: OpSpec, kf: KernelFile, case: Case, bench: BenchSettings,
                            got: _Measured, hot: _Hot, peaks: CpuPeaks, launched: int
                            ) -> tuple[Roofline, Diagnosis]:
    """The kernel's bandwidth against the machine's peak in the same cache state, for its
    mix of reads and writes (where a written line is read first, a kernel that only reads
    can pass the triad's figure), and the bottleneck the evidence points to."""
    single = (hot.busy or launched) == 1
    written = spec.written_share(case.sizes)
    # under the floor the clock does not resolve a call: the rates are taken at the floor
    # (what the kernel achieves at least), the diagnosis from what was read
    roof = roofline(spec, case.sizes, max(got.t_ms, got.floor_ms),
                    peaks.peak_gbps_for(got.cache, written),
                    peaks.peak_gflops)
    class_bw = peaks.peak_gbps_for(got.cache, written, single=single)
    class_fl = peaks.fma_1t_gflops if single else peaks.peak_gflops
    access, access_text = _access_evidence(hot.focus)
    note = "one thread" if single else f"{launched} threads"
    ws = _working_set(spec, case, bench)
    diag = diagnose(
        got.t_ms, share_of(roof.achieved_gbps, class_bw, "GB/s",
                           f"{'triad' if written is None or not peaks.read_gbps else 'sweeps'} "
                           f"for this mix, {note}"),
        share_of(roof.achieved_gflops, class_fl, "GFLOP/s", f"FMA, {note}"),
        launch_ms=got.floor_ms, per_call="each call", access=access,
        evidence_extra=[e for e in (access_text, _vec_evidence(hot.focus),
                                    _chain_evidence(hot.focus, kf.text)) if e],
        above_peak=f"above the DRAM peak: the {ws / 2**20:.0f} MiB working set is partly "
                   f"cache-resident (last-level cache {peaks.llc_mib or 0:.0f} MiB)")
    return roof, diag


def _timing_metrics(case: Case, got: _Measured, roof: Roofline, peaks: CpuPeaks,
                    written: float | None) -> dict[str, Metric]:
    row = got.run.rows[0]
    m: dict[str, Metric] = {}
    m["time_ms"] = Metric(value=got.t_ms, unit="ms",
                          reason=f"median of {len(got.run.samples.get(_k(case), []))} runs")
    m["timing_floor_ms"] = Metric(
        value=got.floor_ms, unit="ms",
        reason="the least time the parent's clock resolves here: the backend's floor, or "
               "more where this session's calls of nothing jitter more")
    m["p10_ms"] = Metric(value=row.p10_ms, unit="ms")
    m["p90_ms"] = Metric(value=row.p90_ms, unit="ms")
    m["achieved_bandwidth"] = Metric(value=roof.achieved_gbps, unit="GB/s",
                                     reason="cost model bytes / time")
    m["achieved_bandwidth_p10"] = Metric(
        value=roof.bytes / (row.p10_ms * 1e6) if row.p10_ms else None, unit="GB/s",
        reason="at the 10th-percentile time: the best runs (less noise from a busy machine)")
    sweeps = ("STREAM triad and read-only sweep, cache-resident (warm)"
              if got.cache == "warm" and peaks.triad_warm_gbps else
              "STREAM triad and read-only sweep, arrays > 2x LLC")
    mix = (f"for {written:.0%} of the bytes written (between the read sweep, none written, "
           "and the triad, a third)" if written is not None and peaks.read_gbps
           else "the triad's own mix (no read-only sweep measured)")
    m["peak_bandwidth"] = Metric(value=roof.peak_gbps, unit="GB/s", reason=f"{sweeps}, {mix}")
    m["peak_bandwidth_1t"] = Metric(value=peaks.triad_1t_gbps, unit="GB/s",
                                    reason="triad, 1 thread")
    m["bandwidth_pct"] = Metric(value=_pct(roof.bandwidth_share), unit="%")
    m["achieved_flops"] = Metric(value=roof.achieved_gflops, unit="GFLOP/s",
                                 reason="cost model flops / time")
    m["peak_flops"] = Metric(value=roof.peak_gflops, unit="GFLOP/s", reason="fp32 FMA loop")
    m["compute_pct"] = Metric(value=_pct(roof.compute_share), unit="%")
    m["intensity"] = Metric(value=roof.intensity, unit="FLOP/byte")
    m["bound_ms"] = Metric(value=roof.bound_ms, unit="ms", reason="least time the peaks allow")
    m["numpy_copy_bandwidth"] = Metric(value=peaks.numpy_copy_gbps, unit="GB/s",
                                       reason="np.copyto, 1 thread")
    return m


def _thread_metrics(launched: int, available: int, openmp: bool, hot: _Hot,
                    hot_reason: str) -> dict[str, Metric]:
    return {
        "threads_launched": Metric(value=launched, unit="threads",
                                   reason="OpenMP" if openmp else "serial (no -fopenmp)"),
        "threads_available": Metric(value=available, unit="threads"),
        "threads_busy": Metric(value=hot.busy, unit="threads",
                               reason="threads with perf samples in the kernel"
                               if hot.busy is not None else (hot_reason or "no perf samples")),
    }


def _source_metrics(focus: list[Loop], vec_reason: str, samples: Samples | None,
                    hot_method: str, hot_reason: str) -> dict[str, Metric]:
    """The hot loops' widest stride and vector width, and what perf sampled."""
    inner = focus[0] if focus else None
    worst = max((a for lp in focus[:2] for a in lp.accesses
                 if a.stride_elems is not None), key=lambda a: abs(a.stride_elems or 0),
                default=None)
    return {
        "hot_loop_stride": Metric(
            value=abs(worst.stride_elems) if worst and worst.stride_elems is not None else None,
            unit="elements", reason=f"{worst.array}[] stride {worst.stride} in the loop at "
            f"line {worst.line}" if worst else "no analyzable subscript"),
        "hot_loop_vector_bytes": Metric(
            value=(inner.vector_bytes or 0) if inner and inner.vectorized is not None else None,
            unit="bytes", reason=(f"line {inner.line}: {inner.vec_text()}" if inner
                                  else "no loop") if not vec_reason else vec_reason),
        "perf_samples": Metric(value=samples.kernel if samples else None, unit="samples",
                               reason=hot_method),
        "omp_runtime_samples": Metric(value=samples.runtime if samples else None,
                                      unit="samples",
                                      reason="OpenMP runtime (spin/wait), not counted as hot"
                                      if samples else hot_reason),
    }


def _counter_metrics(counters: dict[str, float | None], why_not: str) -> dict[str, Metric]:
    """perf stat's counters per call, IPC and the cache hit rates they give."""
    m: dict[str, Metric] = {}
    for name, event in (("cycles", "cycles"), ("instructions", "instructions"),
                        ("cache_misses", "cache-misses"), ("llc_loads", "LLC-loads"),
                        ("llc_load_misses", "LLC-load-misses")):
        v = counters.get(event)
        m[name] = Metric(value=v, unit="per call", reason="perf stat" if v is not None
                         else why_not or "not supported")
    ipc = (counters["instructions"] / counters["cycles"]
           if counters.get("instructions") and counters.get("cycles") else None)
    m["ipc"] = Metric(value=ipc, unit="instr/cycle", reason="perf stat" if ipc else why_not)
    l2 = hit_ratio_pct(counters.get("l2_rqsts.miss"), counters.get("l2_rqsts.references"))
    llc = hit_ratio_pct(counters.get("LLC-load-misses"), counters.get("LLC-loads"))
    m["l2_hit_rate"] = Metric(value=l2, unit="%", reason="perf stat l2_rqsts" if l2 is not None
                              else why_not or "no L2 events")
    m["llc_hit_rate"] = Metric(value=llc, unit="%", reason="perf stat LLC-loads"
                               if llc is not None else why_not or "no LLC events")
    return m


def _summary_fields(roof: Roofline, got: _Measured, hot: _Hot, m: dict[str, Metric],
                    launched: int, available: int, openmp: bool, vec_reason: str) -> Fields:
    """The fixed template's fields, the CPU's evidence in the GPU profile's order."""
    pct = f"{roof.bandwidth_share * 100:.0f}%" if roof.bandwidth_share is not None else "n/a"
    l2, llc = m["l2_hit_rate"].value, m["llc_hit_rate"].value
    if l2 is not None:
        l2_text = f"L2 hit {l2:.0f}%"
    elif llc is not None:
        l2_text = f"L2 hit n/a, LLC hit {llc:.0f}%"
    else:
        l2_text = f"L2 hit n/a ({_short(got.counters_reason or 'no counters')})"
    occ = (f"occupancy {hot.busy}/{available} threads busy" if hot.busy is not None
           else f"occupancy n/a ({_short(got.hot_reason or 'no perf')})")
    sampled = got.samples is not None and got.samples.kernel
    return Fields(
        launch=f"threads {launched}/{available}" + (" (OpenMP)" if openmp else " (serial)"),
        bandwidth=f"BW {roof.achieved_gbps:.1f} of {roof.peak_gbps:.1f} GB/s ({pct}, "
                  f"{got.cache})",
        coalescing="stride: " + _stride_text(hot.focus),
        l2=l2_text,
        registers="vec: " + (_vec_summary(hot.focus)
                             if not vec_reason else f"n/a ({_short(vec_reason)})"),
        occupancy=occ,
        hot="hot: " + (_hot_text(hot.regions) if sampled
                       else "(static est.) " + _hot_text(hot.regions)),
    )


def _vec_lines(loops: list[Loop], why_none: str) -> str:
    """The vectorization report per loop, as the compiler-flags specialist reads it."""
    lines = [f"line {lp.line} `{lp.header[:80]}`: {lp.vec_text()}" for lp in loops
             if lp.vectorized is not None]
    if not lines:
        return f"g++ vectorization report: no loop lines ({why_none or 'none reported'})"
    return "g++ -fopt-info-vec report:\n" + "\n".join(lines[:20])


def _k(case: Case) -> str:
    return f"{case.group}[{case.index}]"


def _require_correct(run: KernelRun, kf: KernelFile) -> None:
    if not run.correct:
        raise ProfileFailed(f"{kf.path or 'kernel'}: not correct ({run.first_failure()}); "
                            "profile a kernel that passes `kernelcrew check`")


def _record(h: Harness, be: CpuBackend, spec: OpSpec, kf: KernelFile, exe: str, reps: int
            ) -> tuple[Samples | None, str]:
    comp_g = be.compile(kf, spec, extra_flags=("-g",))
    if not comp_g.ok:
        return None, "the -g build failed"
    # the timing run judged this kernel; the re-run only needs to finish
    run = h.run(comp_g, kf, reps=reps, keep=True, judge=False,
                wrap=[exe, "record", "-e", "cpu-clock", "-F", str(PERF_FREQ_HZ), "-q",
                      "-o", "perf.data", "--"])
    try:
        if not run.outcome.ok or run.out_dir is None or not (run.out_dir / "perf.data").exists():
            return None, "perf record run failed: " + (run.outcome.reason or "no perf.data")
        try:
            return perf_samples(run.out_dir, comp_g.artifact or "", exe), ""
        except RuntimeError as e:
            return None, str(e)
    finally:
        if run.out_dir is not None:
            shutil.rmtree(run.out_dir, ignore_errors=True)


def _sampled_hot(s: Samples, loops: list[Loop], lines: list[str]
                 ) -> tuple[list[HotRegion], list[Loop]]:
    """Samples by the innermost loop holding their line (a line outside loops, or a
    function the kernel calls, stands alone); regions under 1% are dropped."""
    regions: Counter = Counter()
    what: dict[str, str] = {}
    loop_of: dict[str, Loop] = {}
    for ln, n in s.lines.items():
        lp = loop_at(loops, ln) if ln > 0 else None
        if lp is not None:
            key = f"loop l.{lp.line}" + (f"-{lp.end_line}" if lp.end_line > lp.line else "")
            what[key], loop_of[key] = _loop_text(lp, lines), lp
        elif 0 < ln <= len(lines):
            key = f"line {ln}"
            what[key] = lines[ln - 1].strip()
        else:
            key = "kernel (line unknown)"
        regions[key] += n
    for name, n in s.external.items():
        regions[name] += n
        what[name] = "called from the kernel"
    ranked = [(k, n) for k, n in regions.most_common() if n >= 0.01 * s.kernel]
    hot = [HotRegion(where=k, share=n / s.kernel, what=what.get(k, "")[:80])
           for k, n in ranked[:5]]
    return hot, [loop_of[k] for k, _ in ranked if k in loop_of]


def _loop_text(lp: Loop, lines: list[str]) -> str:
    """The first statement of a loop's body (the header's tail for a one-line loop)."""
    head = lines[lp.line - 1]
    if lp.end_line == lp.line:
        return head.split(")", 1)[-1].strip() if ")" in head else head.strip()
    for text in lines[lp.line:lp.end_line]:
        t = text.strip()
        if t and t not in ("{", "}") and not t.startswith(("#", "//")):
            return t
    return head.strip()


def _static_hot(loops: list[Loop], lines: list[str]) -> tuple[list[HotRegion], list[Loop]]:
    """Innermost loops by the product of the trip counts of their nest (an estimate)."""
    by_line = {lp.line: lp for lp in loops}

    def work(lp: Loop) -> int:
        total, cur = 1, lp
        while cur is not None:
            total *= cur.trip_value if cur.trip_value else 1
            cur = by_line.get(cur.parent) if cur.parent else None
        return total

    inner = sorted((lp for lp in loops if lp.innermost), key=lambda lp: -work(lp))
    total = sum(work(lp) for lp in inner) or 1
    hot = [HotRegion(where=f"loop l.{lp.line}" + (f"-{lp.end_line}" if lp.end_line > lp.line
                                                  else ""), share=None,
                     what=f"~{work(lp) / total:.0%} of loop iterations (static estimate): "
                          f"{_loop_text(lp, lines)[:50]}")
           for lp in inner[:3]]
    return hot, inner


def _working_set(spec: OpSpec, case: Case, bench: BenchSettings) -> int:
    """Bytes the timed calls touch: every input set's inputs plus the outputs."""

    total = 0
    for name, t in list(spec.inputs.items()) + list(spec.outputs.items()):
        n = math.prod(spec.shape(name, case.sizes)) * DTYPES[t.dtype].itemsize
        total += n * (bench.input_sets if name in spec.inputs else 1)
    return total


def _access_evidence(loops: list[Loop]) -> tuple[str, str]:
    """("poor" | "good" | "unknown", one sentence) from the strides in the hot loops."""
    accesses = [(lp, a) for lp in loops[:3] for a in lp.accesses]
    if not accesses:
        return "unknown", ""
    large = [(lp, a) for lp, a in accesses if a.kind == "large"]
    if large:
        lp, a = large[0]
        n = f" ({a.stride_elems} elements)" if a.stride_elems is not None else ""
        verb = "written" if a.write else "read"
        tiled = (f"; the loop runs only {lp.trip} iterations (tiled)"
                 if lp.trip and lp.trip.startswith("<=") else "")
        return ("poor" if not tiled else "tiled",
                f"{a.array}[] is {verb} with stride {a.stride}{n} in the inner loop at line "
                f"{lp.line}: a poor access pattern (each access touches a new cache line)"
                + tiled)
    if any(a.kind == "unknown" for _, a in accesses):
        return "unknown", "some subscripts could not be analyzed"
    return "good", "the hot inner loops walk memory with unit stride"


def _vec_evidence(loops: list[Loop]) -> str:
    missed = [lp for lp in loops[:2] if lp.vectorized is False]
    if missed:
        lp = missed[0]
        return f"the hot loop at line {lp.line} is not vectorized ({lp.missed or 'no reason'})"
    done = [lp for lp in loops[:2] if lp.vectorized]
    if done:
        return f"the hot loop at line {done[0].line} is vectorized ({done[0].vector_bytes} B)"
    return ""


def _chain_evidence(loops: list[Loop], text: str) -> str:
    """A scalar accumulated in an innermost loop (`acc += ...`): a serial dependency chain
    unless the compiler vectorized the loop."""
    src = text.splitlines()
    for lp in loops[:2]:
        if lp.vectorized:
            continue
        body = "\n".join(src[lp.line - 1:lp.end_line])
        m = re.search(r"\b([A-Za-z_]\w*)\s*(\+=|-=|\*=)", body)
        if m and not re.search(rf"\b{m.group(1)}\s*\[", body):
            return (f"`{m.group(1)} {m.group(2)} ...` at line {lp.line} is a serial dependency "
                    f"chain (one add per FP-add latency)")
    return ""


def _stride_text(loops: list[Loop]) -> str:
    parts = []
    for lp in loops[:2]:
        accs = {}
        for a in lp.accesses:
            accs.setdefault((a.array, a.stride), a)
        if not accs:
            continue
        items = sorted(accs.values(), key=lambda a: (a.kind != "large", a.kind == "invariant"))
        tiled = bool(lp.trip and lp.trip.startswith("<="))
        verdict = "in a tile" if tiled else "poor"
        txt = ", ".join(
            f"{a.array} {'inner stride=' + a.stride if a.stride not in (None, '1', '0') else ''}"
            f"{'unit' if a.stride == '1' else 'invariant' if a.stride == '0' else ''}"
            f"{'unknown' if a.stride is None else ''}"
            f"{f' ({a.stride_elems}, {verdict})' if a.kind == 'large' else ''}".replace("  ", " ")
            for a in items[:3])
        parts.append(f"l.{lp.line}{' tiled' if tiled else ''} {txt}")
    return "; ".join(parts) if parts else "unknown (no analyzable loop)"


def _vec_summary(loops: list[Loop]) -> str:
    parts = []
    for lp in loops[:2]:
        if lp.vectorized:
            parts.append(f"l.{lp.line} yes {lp.vector_bytes}B")
        elif lp.vectorized is False:
            parts.append(f"l.{lp.line} no ({lp.missed or 'no reason'})")
        else:
            parts.append(f"l.{lp.line} no report")
    return ", ".join(parts) if parts else "n/a (no loops)"


def _hot_text(hot: list[HotRegion]) -> str:
    parts = []
    for r in hot[:3]:
        where = r.where.replace("line ", "l.").replace("loop ", "")
        share = f" {r.share:.0%}" if r.share is not None else ""
        what = r.what if not r.what.startswith("~") else r.what.split(":", 1)[-1]
        parts.append(f"{where}{share} {what.strip().rstrip(';')[:40]}".strip())
    return "; ".join(parts) if parts else "n/a (no samples)"


def _short(text: str) -> str:
    return " ".join(text.split()[:4])[:40]


def _pct(share: float | None) -> float | None:
    return None if share is None else share * 100

