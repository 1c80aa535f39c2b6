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

import functools
import math
import os
import re
import shutil
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from kernelcrew.kernels.kernelfile import KernelFile
from kernelcrew.kernels.spec import Case, OpSpec
from kernelcrew.tools.compile import cache_key, machine_fingerprint, tool_version
from kernelcrew.tools.config import BenchSettings, CompileLimits, Limits, cache_dir, scratch_root
from kernelcrew.tools.cpu import CXX, CpuBackend, cpu_threads
from kernelcrew.tools.cpu_source import (
    Loop,
    VecLine,
    analyze,
    apply_vec_report,
    loop_at,
    parse_vec_report,
    size_values,
)
from kernelcrew.tools.harness import Harness, KernelRun
from kernelcrew.tools.peaks import cpu_peaks
from kernelcrew.tools.results import HotRegion, Metric, ProfileResult
from kernelcrew.tools.sandbox import run_confined

PERF_ENV = "KERNELCREW_PERF"  # path of perf, or "off" to profile without it
PERF_FREQ_HZ = 2000  # cpu-clock samples per second per thread
PERF_TARGET_S = 0.25  # kernel time wanted under perf record (~500 samples)
PERF_MAX_REPS = 200
PERF_TOOL_TIMEOUT_S = 60.0  # perf script, nm, addr2line
LAUNCH_BOUND_MS = 0.05  # a ctypes call plus an OpenMP fork/join cost microseconds
COUNTER_EVENTS = ("cycles", "instructions", "cache-references", "cache-misses", "LLC-loads",
                  "LLC-load-misses")
L2_EVENTS = ("l2_rqsts.references", "l2_rqsts.miss")  # Intel core PMU names
RUNTIME_LIBS = ("libgomp", "libomp", "libiomp")  # OpenMP runtimes: spin/wait, not kernel work
MATH_LIBS = ("libm.", "libm-", "libmvec", "libstdc++", "libgcc_s")  # code a kernel calls

Say = Callable[[str], None]


# -- perf ------------------------------------------------------------------------------
def perf_exe() -> str | None:
    v = os.environ.get(PERF_ENV, "")
    if v.lower() in ("off", "0", "no", "none"):
        return None
    return v or shutil.which("perf")


@dataclass(frozen=True)
class PerfSupport:
    record: bool
    record_reason: str  # why not ("" when it works)
    events: tuple[str, ...]  # hardware events perf stat can count here
    counters_reason: str  # why no counters ("" when some work)


@functools.cache
def perf_support() -> PerfSupport:
    """Probe once per process, inside the same sandbox the worker gets."""
    exe = perf_exe()
    if exe is None:
        why = "perf off" if os.environ.get(PERF_ENV) else "no perf"
        return PerfSupport(False, why, (), why)
    work = scratch_root() / f"perfprobe-{uuid.uuid4().hex[:8]}"
    try:
        rec = run_confined([exe, "record", "-e", "cpu-clock", "-q", "-o", "probe.data", "--",
                            "true"], scratch=work, timeout_s=30, log_name="record")
        record_ok = rec.returncode == 0 and (work / "probe.data").exists()
        record_reason = "" if record_ok else "perf record failed: " + _last_line(rec.stderr)
        events: tuple[str, ...] = ()
        reason = ""
        for evs in (COUNTER_EVENTS + L2_EVENTS, COUNTER_EVENTS):
            st = run_confined([exe, "stat", "-x,", "-e", ",".join(evs), "--", "true"],
                              scratch=work, timeout_s=30, log_name="stat")
            if st.returncode != 0:
                reason = "perf stat failed: " + _last_line(st.stderr)
                continue
            counts = parse_perf_stat(st.stderr)
            events = tuple(e for e in evs if counts.get(e) is not None)
            reason = "" if events else "no HW counters"
            break
        return PerfSupport(record_ok, record_reason, events, reason)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _last_line(text: str) -> str:
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    return lines[-1][:120] if lines else "no output"


def parse_perf_stat(text: str) -> dict[str, float | None]:
    """`perf stat -x,` output -> {event: count, or None when not supported/counted}."""
    out: dict[str, float | None] = {}
    for line in text.splitlines():
        parts = line.split(",")
        if len(parts) < 3 or not parts[2]:
            continue
        event = parts[2].split(":")[0]
        try:
            out[event] = float(parts[0])
        except ValueError:
            out[event] = None  # <not supported> / <not counted>
    return out


_SCRIPT = re.compile(r"^\s*(?P<tid>\d+)\s+(?P<ip>[0-9a-f]+)\s+(?P<sym>.*?)\s+"
                     r"\((?P<dso>[^)]*)\)\s*$")


@dataclass
class Samples:
    """perf record samples of one worker run, attributed."""

    total: int = 0  # every sample of the worker
    kernel: int = 0  # in the kernel's library or code it calls (libm ...)
    runtime: int = 0  # in the OpenMP runtime (mostly spin/wait)
    lines: Counter = field(default_factory=Counter)  # kernel source line -> samples
    external: Counter = field(default_factory=Counter)  # "libm erff" -> samples
    threads: Counter = field(default_factory=Counter)  # tid -> samples in kernel code


def perf_samples(out_dir: Path, artifact: str, exe: str) -> Samples:
    """perf script + nm + addr2line, each in the sandbox (perf.data came from the kernel's
    process, so it is parsed with the same confinement)."""
    res = run_confined([exe, "script", "-i", "perf.data", "-F", "tid,ip,sym,symoff,dso"],
                       scratch=out_dir, timeout_s=PERF_TOOL_TIMEOUT_S, log_name="script")
    if res.returncode != 0:
        raise RuntimeError(f"perf script failed: {_last_line(res.stderr)}")
    script = (out_dir / "script.stdout").read_text(errors="replace")
    so = Path(artifact).resolve()
    s = Samples()
    offsets: Counter = Counter()  # (symbol, offset) in the kernel library -> samples
    is_kernel: dict[str, bool] = {}
    for raw in script.splitlines():
        m = _SCRIPT.match(raw)
        if not m:
            continue
        s.total += 1
        dso, sym, tid = m.group("dso"), m.group("sym"), int(m.group("tid"))
        name = Path(dso).name
        if dso not in is_kernel:
            is_kernel[dso] = _same_file(dso, so)
        if is_kernel[dso]:
            s.kernel += 1
            s.threads[tid] += 1
            base, _, off = sym.rpartition("+0x")
            if "@plt" in sym:
                s.external[f"call {sym.split('@')[0]} (plt)"] += 1
            elif base and off:
                offsets[(base, int(off, 16))] += 1
            else:
                s.external["kernel (no symbol)"] += 1
        elif any(name.startswith(lib) for lib in RUNTIME_LIBS):
            s.runtime += 1
        elif any(name.startswith(lib) for lib in MATH_LIBS):
            s.kernel += 1
            s.threads[tid] += 1
            fn = re.sub(r"^_+|(_fma|_avx2|_avx512|_sse\d*|_finite)+$", "", sym.rpartition("+0x")[0]
                        or sym)
            s.external[f"{name.split('.')[0]} {fn or '?'}"] += 1
    if offsets:
        lines = _addr_lines(out_dir, str(so), offsets)
        for key, n in offsets.items():
            s.lines[lines.get(key, 0)] += n
    return s


def _same_file(a: str, b: Path) -> bool:
    try:
        return Path(a).resolve() == b
    except OSError:
        return False


def _addr_lines(out_dir: Path, so: str, offsets: Counter) -> dict[tuple[str, int], int]:
    """(symbol, offset) -> line in kernel.cpp (0: unknown), via nm and addr2line -i."""
    nm = run_confined(["nm", "--defined-only", so], scratch=out_dir,
                      timeout_s=PERF_TOOL_TIMEOUT_S, log_name="nm")
    addr: dict[str, int] = {}
    for line in (out_dir / "nm.stdout").read_text(errors="replace").splitlines():
        parts = line.split()
        if len(parts) == 3:
            try:
                addr[parts[2]] = int(parts[0], 16)
            except ValueError:
                continue
    if nm.returncode != 0 or not addr:
        return {}
    keys = [k for k in offsets if k[0] in addr]
    if not keys:
        return {}
    res = run_confined(["addr2line", "-e", so, "-i", "-a",
                        *(hex(addr[k[0]] + k[1]) for k in keys)],
                       scratch=out_dir, timeout_s=PERF_TOOL_TIMEOUT_S, log_name="a2l")
    if res.returncode != 0:
        return {}
    by_addr: dict[int, int] = {}
    current: int | None = None
    for line in (out_dir / "a2l.stdout").read_text(errors="replace").splitlines():
        line = line.strip()
        if line.startswith("0x"):
            current = int(line, 16)
            continue
        if current is None or current in by_addr:
            continue  # -i lists the inlining chain innermost first: keep the first
        m = re.match(r"^(.*):(\d+)", line)
        if m and Path(m.group(1)).name == "kernel.cpp":
            by_addr[current] = int(m.group(2))
    return {k: by_addr.get(addr[k[0]] + k[1], 0) for k in keys}


# -- the vectorization report ----------------------------------------------------------
def vec_report(kf: KernelFile) -> tuple[dict[int, VecLine], str]:
    """g++'s vectorization report for the kernel's own flags, per loop line (cached)."""
    flags = list(kf.meta.flags) + kf.defines
    key = cache_key(kf.text, "vec-report", flags, tool_version(CXX), machine_fingerprint())
    path = cache_dir() / "vecreport" / f"{key}.txt"
    if not path.exists():
        limits = CompileLimits()
        work = scratch_root() / f"vec-{key}-{uuid.uuid4().hex[:6]}"
        work.mkdir(parents=True)
        try:
            (work / "kernel.cpp").write_text(kf.text)
            run = run_confined(
                [CXX, "-std=c++17", "-shared", "-fPIC", "-fno-gnu-unique", *flags,
                 "-fopt-info-vec-optimized-missed=vec.txt", "kernel.cpp", "-o", "kernel.so"],
                scratch=work, timeout_s=limits.timeout_s, cpu_s=limits.timeout_s + 5,
                address_space_gib=limits.address_space_gib, file_size_mib=limits.file_size_mib,
                processes=32, log_name="compiler")
            if run.returncode != 0 or not (work / "vec.txt").exists():
                return {}, f"no report ({run.describe()})"
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(f".{uuid.uuid4().hex[:6]}.tmp")
            tmp.write_text((work / "vec.txt").read_text(errors="replace"))
            tmp.replace(path)
        finally:
            shutil.rmtree(work, ignore_errors=True)
    report = parse_vec_report(path.read_text(), "kernel.cpp")
    if not any(f in flags for f in ("-O3", "-Ofast", "-ftree-vectorize")):
        # g++ >= 12 vectorizes at -O2 only under the very-cheap cost model, which refuses
        # any loop needing a runtime check or an epilogue and says "no vectype"
        for v in report.values():
            if v.reason == "no vectype":
                v.reason = "-O2 cheap cost model"
    return report, ""


# -- counters ----------------------------------------------------------------------------
def count_events(h: Harness, comp, kf: KernelFile, events: tuple[str, ...], exe: str,
                 reps: int) -> dict[str, float | None]:
    """Hardware counts per kernel call: two runs (3 and 3 + reps timed calls) under perf
    stat, the difference divided by reps, so start-up and checking cancel out."""
    counts = []
    for n in (3, 3 + reps):
        run = h.run(comp, kf, reps=n, keep=True, judge=False,
                    wrap=[exe, "stat", "-x,", "-o", "stat.txt", "-e", ",".join(events), "--"])
        if not run.outcome.ok or run.out_dir is None or not (run.out_dir / "stat.txt").exists():
            return {}
        counts.append(parse_perf_stat((run.out_dir / "stat.txt").read_text(errors="replace")))
        shutil.rmtree(run.out_dir, ignore_errors=True)
    out: dict[str, float | None] = {}
    for e in events:
        a, b = counts[0].get(e), counts[1].get(e)
        out[e] = (b - a) / reps if a is not None and b is not None and b >= a else None
    return out


def _ratio_pct(hit_from: float | None, total: float | None) -> float | None:
    if hit_from is None or not total:
        return None
    return max(0.0, min(100.0, 100.0 * (1 - hit_from / total)))


# -- the profile -----------------------------------------------------------------------
class _ThreadsBackend(CpuBackend):
    """The CPU backend with the kernel's OpenMP thread count pinned."""

    def __init__(self, threads: int) -> None:
        self.threads = threads

    def worker_env(self) -> dict[str, str]:
        return {**super().worker_env(), "OMP_NUM_THREADS": str(self.threads)}


def profile_cpu(spec: OpSpec, kf: KernelFile, case: Case, *, bench: BenchSettings | None = None,
                limits: Limits | None = None, threads: int | None = None,
                say: Say | None = None) -> ProfileResult:
    from kernelcrew.tools.check import bench_lock
    from kernelcrew.tools.profile import (
        Fields,
        ProfileFailed,
        diagnose,
        render_summary,
        roofline,
        share_of,
    )

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
    support = perf_support()
    exe = perf_exe()
    openmp = "-fopenmp" in kf.meta.flags
    launched = (min(threads, threads_avail) if threads else threads_avail) if openmp else 1
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
            row = run.rows[0]
            if not row.median_ms:
                raise ProfileFailed("no timed runs to profile (reps must be at least 1)")
            t_ms = row.median_ms
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
    say("vectorization report")
    vec, vec_reason = vec_report(kf)
    values = size_values(kf, spec, case.sizes)
    loops = analyze(kf.text, entry=kf.meta.entry, values=values)
    apply_vec_report(loops, vec)

    # -- hot regions and the loops they fall in
    lines = kf.text.splitlines()
    hot: list[HotRegion] = []
    hot_loops: list[Loop] = []
    if samples is not None and samples.kernel:
        hot, hot_loops = _sampled_hot(samples, loops, lines)
        hot_method = (f"perf record cpu-clock samples ({samples.kernel} in the kernel's code; "
                      f"OpenMP runtime {samples.runtime} more)")
    else:
        if samples is not None and not hot_reason:
            hot_reason = "no samples (calls too short)"
        hot, hot_loops = _static_hot(loops, lines)
        hot_method = ("static estimate: innermost loops ranked by trip counts"
                      + (f" ({hot_reason})" if hot_reason else ""))
    # the innermost loops carry the work (and the compiler's vectorization decision); an
    # outer loop only counts when no inner loop was hot
    focus = ([lp for lp in hot_loops if lp.innermost] or hot_loops
             or [lp for lp in loops if lp.innermost])
    busy = None
    if samples is not None and samples.threads:
        top = max(samples.threads.values())
        busy = sum(1 for n in samples.threads.values() if n >= 0.1 * top)

    # -- roofline and diagnosis
    single = (busy or launched) == 1
    # the kernel's bandwidth against the machine's peak in the same cache state
    roof = roofline(spec, case.sizes, t_ms, peaks.peak_gbps_for(cache), peaks.peak_gflops)
    class_bw = peaks.triad_1t_gbps if single else peaks.peak_gbps
    class_fl = peaks.fma_1t_gflops if single else peaks.peak_gflops
    access, access_text = _access_evidence(focus)
    vec_text = _vec_evidence(focus)
    chains = _chain_evidence(focus, kf.text)
    note = "one thread" if single else f"{launched} threads"
    ws = _working_set(spec, case, bench)
    diag = diagnose(
        t_ms, share_of(roof.achieved_gbps, class_bw, "GB/s", f"triad, {note}"),
        share_of(roof.achieved_gflops, class_fl, "GFLOP/s", f"FMA, {note}"),
        launch_ms=LAUNCH_BOUND_MS, per_call="each call", access=access,
        evidence_extra=[e for e in (access_text, vec_text, chains) if e],
        above_peak=f"above the DRAM triad: the {ws / 2**20:.0f} MiB working set is partly "
                   f"cache-resident (last-level cache {peaks.llc_mib or 0:.0f} MiB)")

    # -- metrics
    m: dict[str, Metric] = {}
    m["device"] = Metric(value=None, unit="", reason=be.describe())
    m["time_ms"] = Metric(value=t_ms, unit="ms",
                          reason=f"median of {len(run.samples.get(_k(case), []))} runs")
    m["p10_ms"] = Metric(value=row.p10_ms, unit="ms")
    m["p90_ms"] = Metric(value=row.p90_ms, unit="ms")
    m["achieved_bandwidth"] = Metric(value=roof.achieved_gbps, unit="GB/s",
                                     reason="cost model bytes / time")
    m["achieved_bandwidth_p10"] = Metric(
        value=roof.bytes / (row.p10_ms * 1e6) if row.p10_ms else None, unit="GB/s",
        reason="at the 10th-percentile time: the best runs (less noise from a busy machine)")
    m["peak_bandwidth"] = Metric(value=roof.peak_gbps, unit="GB/s", reason=(
        "STREAM triad, cache-resident (warm)" if cache == "warm" and peaks.triad_warm_gbps
        else "STREAM triad, arrays > 2x LLC"))
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
    m["threads_launched"] = Metric(value=launched, unit="threads",
                                   reason="OpenMP" if openmp else "serial (no -fopenmp)")
    m["threads_available"] = Metric(value=threads_avail, unit="threads")
    m["threads_busy"] = Metric(value=busy, unit="threads",
                               reason="threads with perf samples in the kernel" if busy is not None
                               else (hot_reason or "no perf samples"))
    inner = focus[0] if focus else None
    worst = max((a for lp in focus[:2] for a in lp.accesses
                 if a.stride_elems is not None), key=lambda a: abs(a.stride_elems or 0),
                default=None)
    m["hot_loop_stride"] = Metric(
        value=abs(worst.stride_elems) if worst and worst.stride_elems is not None else None,
        unit="elements", reason=f"{worst.array}[] stride {worst.stride} in the loop at line "
        f"{worst.line}" if worst else "no analyzable subscript")
    m["hot_loop_vector_bytes"] = Metric(
        value=(inner.vector_bytes or 0) if inner and inner.vectorized is not None else None,
        unit="bytes", reason=(f"line {inner.line}: {inner.vec_text()}" if inner else "no loop")
        if not vec_reason else vec_reason)
    m["perf_samples"] = Metric(value=samples.kernel if samples else None, unit="samples",
                               reason=hot_method)
    m["omp_runtime_samples"] = Metric(value=samples.runtime if samples else None, unit="samples",
                                      reason="OpenMP runtime (spin/wait), not counted as hot"
                                      if samples else hot_reason)
    why_counters = support.counters_reason or ("counting failed" if not counters else "")
    for name, event in (("cycles", "cycles"), ("instructions", "instructions"),
                        ("cache_misses", "cache-misses"), ("llc_loads", "LLC-loads"),
                        ("llc_load_misses", "LLC-load-misses")):
        v = counters.get(event)
        m[name] = Metric(value=v, unit="per call", reason="perf stat" if v is not None
                         else why_counters or "not supported")
    ipc = (counters["instructions"] / counters["cycles"]
           if counters.get("instructions") and counters.get("cycles") else None)
    m["ipc"] = Metric(value=ipc, unit="instr/cycle", reason="perf stat" if ipc else why_counters)
    l2 = _ratio_pct(counters.get("l2_rqsts.miss"), counters.get("l2_rqsts.references"))
    llc = _ratio_pct(counters.get("LLC-load-misses"), counters.get("LLC-loads"))
    m["l2_hit_rate"] = Metric(value=l2, unit="%", reason="perf stat l2_rqsts" if l2 is not None
                              else why_counters or "no L2 events")
    m["llc_hit_rate"] = Metric(value=llc, unit="%", reason="perf stat LLC-loads" if llc is not None
                               else why_counters or "no LLC events")

    # -- the summary
    pct = f"{roof.bandwidth_share * 100:.0f}%" if roof.bandwidth_share is not None else "n/a"
    if l2 is not None:
        l2_text = f"L2 hit {l2:.0f}%"
    elif llc is not None:
        l2_text = f"L2 hit n/a, LLC hit {llc:.0f}%"
    else:
        l2_text = f"L2 hit n/a ({_short(why_counters or 'no counters')})"
    occ = (f"occupancy {busy}/{threads_avail} threads busy" if busy is not None
           else f"occupancy n/a ({_short(hot_reason or 'no perf')})")
    fields = Fields(
        launch=f"threads {launched}/{threads_avail}" + (" (OpenMP)" if openmp else " (serial)"),
        bandwidth=f"BW {roof.achieved_gbps:.1f} of {roof.peak_gbps:.1f} GB/s ({pct}, {cache})",
        coalescing="stride: " + _stride_text(focus),
        l2=l2_text,
        registers="vec: " + (_vec_summary(focus)
                             if not vec_reason else f"n/a ({_short(vec_reason)})"),
        occupancy=occ,
        hot="hot: " + (_hot_text(hot) if samples is not None and samples.kernel
                       else "(static est.) " + _hot_text(hot)),
    )
    return ProfileResult(op=spec.name, kernel=str(kf.path or "<memory>"), backend="cpu",
                         case=f"{case.group}[{case.index}] {case.label}", source="cpu",
                         cache=cache,
                         summary=render_summary(fields), metrics=m, bottleneck=diag,
                         roofline=roof, hot_regions=hot)


def _k(case: Case) -> str:
    return f"{case.group}[{case.index}]"


def _require_correct(run: KernelRun, kf: KernelFile) -> None:
    from kernelcrew.tools.profile import ProfileFailed

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
    from kernelcrew.kernels.spec import DTYPES

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

