"""What the backends' profilers (cpu_profile, cuda_profile) share: choosing the case,
the roofline from the op's cost model, the bottleneck rules, and the one fixed summary
template:

  launch shape | peak vs achieved bandwidth | coalescing | L2 hit rate |
  registers per thread | achieved vs theoretical occupancy | three hottest regions

(CPU: threads | bandwidth | access stride | L2 (perf) | vectorization of the hot loops |
threads busy | hot lines). A field that cannot be measured says `n/a (why)`.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import astuple, dataclass

from kernelcrew.errors import InputError, KernelcrewError
from kernelcrew.kernels.spec import Case, OpSpec
from kernelcrew.results import Diagnosis, Roofline

SUMMARY_MAX = 600
SEP = " | "
# the field caps add up to SUMMARY_MAX less the six separators
FIELD_CAPS = (44, 60, 100, 44, 100, 84, 150)
MEMORY_SHARE = 0.5  # achieved/peak bandwidth at or above this: memory-bound
COMPUTE_SHARE = 0.5  # achieved/peak FLOP/s at or above this: compute-bound

Say = Callable[[str], None]


class ProfileFailed(KernelcrewError):
    """The kernel cannot be profiled: it does not compile, crashes or is wrong (the CLI
    exits 1, as `check` does for a rejected kernel)."""


@dataclass(frozen=True)
class Fields:
    """The template's fields, in order; each starts with its label."""

    launch: str  # "threads 2/2 (OpenMP)" | "grid 4096x1x1 block 256x1x1"
    bandwidth: str  # "BW 4.1 of 18.0 GB/s (23%)"
    coalescing: str  # "stride: ..." | "sectors/req ld 4.0 st 4.0"
    l2: str  # "L2 hit 87%" | "L2 hit n/a (why)"
    registers: str  # "vec: ..." | "regs 32/thread, 0 B spill"
    occupancy: str  # "occupancy 2/2 threads busy" | "occupancy 61% of 100% theoretical"
    hot: str  # "hot: l.12 80% ...; ...; ..."


CPU_LABELS = ("threads", "BW", "stride", "L2 hit", "vec", "occupancy", "hot")
CUDA_LABELS = ("grid", "BW", "sectors/req", "L2 hit", "regs", "occupancy", "hot")


def render_summary(f: Fields) -> str:
    """Join the fields in template order, each cut to its share of 600 characters."""
    parts = []
    for text, cap in zip(astuple(f), FIELD_CAPS, strict=True):
        text = re.sub(r"\s+", " ", text.replace("|", "/")).strip()
        parts.append(text if len(text) <= cap else text[:cap - 3].rstrip() + "...")
    return SEP.join(parts)[:SUMMARY_MAX]  # the caps already keep it within


# -- the case ----------------------------------------------------------------------------
def pick_case(spec: OpSpec, which: str | None = None) -> Case:
    """`GROUP[i]`, `GROUP` (its largest case) or None: the largest typical case by the
    op's cost bytes (the first of equals)."""
    cases = list(spec.cases())
    if which:
        m = re.fullmatch(r"\s*([A-Za-z0-9_]+)\s*(?:\[\s*(\d+)\s*\])?\s*", which)
        pick = [c for c in cases if m and c.group == m.group(1)
                and (m.group(2) is None or c.index == int(m.group(2)))]
        if not pick:
            known = ", ".join(f"{g}[0..{len(s.cases) - 1}]" for g, s in spec.shapes.items())
            raise InputError(f"no case {which!r} in {spec.name}; use GROUP[i]: {known}")
        return max(pick, key=lambda c: (spec.cost_bytes(c.sizes), -c.index))
    pool = [c for c in cases if c.group == "typical"] or cases
    return max(pool, key=lambda c: (spec.cost_bytes(c.sizes), -c.index))


# -- roofline and diagnosis ----------------------------------------------------------------
def roofline(spec: OpSpec, sizes: dict[str, int], time_ms: float, peak_gbps: float | None,
             peak_gflops: float | None) -> Roofline:
    nbytes, flops = spec.cost_bytes(sizes), spec.cost_flops(sizes)
    t = max(time_ms, 1e-9) / 1e3
    gbps, gflops = nbytes / t / 1e9, flops / t / 1e9
    bound = None
    if peak_gbps or peak_gflops:
        bound = 1e3 * max(nbytes / (peak_gbps * 1e9) if peak_gbps else 0.0,
                          flops / (peak_gflops * 1e9) if peak_gflops else 0.0)
    return Roofline(
        time_ms=time_ms, bytes=nbytes, flops=flops, achieved_gbps=gbps, peak_gbps=peak_gbps,
        achieved_gflops=gflops, peak_gflops=peak_gflops,
        bandwidth_share=gbps / peak_gbps if peak_gbps else None,
        compute_share=gflops / peak_gflops if peak_gflops else None,
        intensity=flops / nbytes if nbytes else 0.0, bound_ms=bound)


@dataclass(frozen=True)
class Share:
    """How close one roof is: achieved / peak, and the sentence that says so."""

    value: float | None
    text: str


def share_of(achieved: float, peak: float | None, unit: str, note: str) -> Share:
    """`4.10 GB/s = 23% of the 18.0 GB/s peak (note)`."""
    if not peak:
        return Share(None, f"{achieved:.2f} {unit} (no peak: {note})" if note else
                     f"{achieved:.2f} {unit}")
    v = achieved / peak
    pct = f"{v:.0%}" if v >= 0.1 else f"{v:.1%}"
    return Share(v, f"{achieved:.2f} {unit} = {pct} of the {peak:.4g} {unit} peak ({note})")


def diagnose(time_ms: float, bw: Share, compute: Share, *, launch_ms: float, per_call: str,
             access: str = "unknown", evidence_extra: list[str] | None = None,
             above_peak: str = "") -> Diagnosis:
    """The bottleneck: a roof at or above half its peak (the nearer one wins), else call
    overhead when a call is tiny, else latency (access pattern, dependency chains)."""
    extra = [e.rstrip(".") for e in (evidence_extra or []) if e]
    b, c = bw.value, compute.value
    if b is not None and b >= MEMORY_SHARE and (c is None or b >= c):
        kind = "memory-bound"
        lead = f"Bandwidth {bw.text}" + (f"; {above_peak}" if b > 1 and above_peak else "") + \
            f"; compute {compute.text}"
    elif c is not None and c >= COMPUTE_SHARE:
        kind, lead = "compute-bound", f"Compute {compute.text}; bandwidth {bw.text}"
    elif time_ms < launch_ms:
        kind = "launch-bound"
        lead = (f"{per_call} takes {time_ms * 1e3:.1f} us, under {launch_ms * 1e3:.0f} us, so call "
                f"overhead dominates; "
                f"bandwidth {bw.text}; compute {compute.text}")
    else:
        kind = "latency-bound"
        lead = f"Neither roof is near: bandwidth {bw.text}; compute {compute.text}"
        if not extra:
            extra = ["dependency chains or the access pattern keep the units idle"]
    evidence = lead + "".join(f"; {e}" for e in extra[:3]) + "."
    return Diagnosis(kind=kind, evidence=evidence, access_pattern=access)
