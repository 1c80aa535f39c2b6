"""perf on the CPU: whether it works here, sampling the worker (`perf record`) and
mapping samples to kernel source lines, and hardware counts per call (`perf stat`).

Everything degrades: where perf is missing or refused, the profiler says so and uses
a static estimate instead.
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from kernelcrew.kernels.kernelfile import KernelFile
from kernelcrew.tools.config import scratch_root
from kernelcrew.tools.judge.harness import Harness
from kernelcrew.tools.sandbox import run_confined

PERF_ENV = "KERNELCREW_PERF"  # path of perf, or "off" to profile without it
PERF_FREQ_HZ = 2000  # cpu-clock samples per second per thread
PERF_TARGET_S = 0.25  # kernel time wanted under perf record (~500 samples)
PERF_MAX_REPS = 200
PERF_TOOL_TIMEOUT_S = 60.0  # perf script, nm, addr2line
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


def hit_ratio_pct(hit_from: float | None, total: float | None) -> float | None:
    if hit_from is None or not total:
        return None
    return max(0.0, min(100.0, 100.0 * (1 - hit_from / total)))


