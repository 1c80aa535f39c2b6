"""The physical bound: what the machine peaks allow for an op's cases, and the share of it
a time reaches."""

from __future__ import annotations

from dataclasses import dataclass

from kernelcrew.kernels.formats import format_for
from kernelcrew.kernels.spec import OpSpec
from kernelcrew.tools.backends.backend import get_backend
from kernelcrew.tools.backends.peaks import bandwidth_ceiling, cpu_peaks


@dataclass
class Bound:
    """What the machine peaks allow for one op's cases, and how close a time gets."""

    bytes: int
    flops: int
    bound_ms: float  # least time the peaks allow
    limit: str  # "bandwidth" or "compute": which peak sets the bound
    achieved_gbps: float | None = None
    achieved_gflops: float | None = None
    bandwidth_share: float | None = None  # achieved / peak bandwidth
    compute_share: float | None = None
    bound_share: float | None = None  # bound_ms / time: share of the roofline reached


@dataclass
class Peaks:
    gbps: float  # bandwidth peak (GB/s): the triad on the CPU, a copy on a device
    gflops: float | None  # FLOP/s peak (GFLOP/s); CUDA: the spec-sheet FP32 rate, or None
    source: str  # how it was measured
    read_gbps: float | None = None  # the CPU's read-only sweep (None: not measured)

    def gbps_for(self, written_share: float | None) -> float:
        """The bandwidth ceiling of an op that writes `written_share` of its bytes (the
        peak as it is without a read-only sweep or a share)."""
        if self.read_gbps is None or written_share is None:
            return self.gbps
        return bandwidth_ceiling(self.gbps, self.read_gbps, written_share)


def machine_peaks(backend: str = "cpu") -> Peaks:
    """The machine's measured peaks (kernelcrew.tools.backends.peaks): this CPU's for
    kernels that run on it (host code), else what the backend reports for its device."""
    if format_for(backend).code != "host":
        r = get_backend(backend).peak_rates()
        return Peaks(r.gbps, r.gflops, r.what)
    p = cpu_peaks()
    return Peaks(p.triad_gbps, p.fma_gflops, f"kernelcrew.tools.backends.peaks: {p.method}",
                 p.read_gbps)


def bound_for(spec: OpSpec, cases: list[dict[str, int]], peaks: Peaks,
              time_ms: float | None = None) -> Bound:
    """The roofline bound of a set of cases run back to back, and the shares a time reaches."""
    nbytes = sum(spec.cost_bytes(c) for c in cases)
    flops = sum(spec.cost_flops(c) for c in cases)
    # each case at the ceiling of its own mix of reads and writes
    mem_ms = sum(spec.cost_bytes(c) / (peaks.gbps_for(spec.written_share(c)) * 1e9) * 1e3
                 for c in cases)
    cmp_ms = flops / (peaks.gflops * 1e9) * 1e3 if peaks.gflops else 0.0
    b = Bound(nbytes, flops, max(mem_ms, cmp_ms), "bandwidth" if mem_ms >= cmp_ms else "compute")
    if time_ms and time_ms > 0:
        b.achieved_gbps = nbytes / (time_ms * 1e-3) / 1e9
        b.achieved_gflops = flops / (time_ms * 1e-3) / 1e9
        b.bandwidth_share = mem_ms / time_ms  # achieved over the cases' own ceilings
        b.compute_share = b.achieved_gflops / peaks.gflops if peaks.gflops else None
        b.bound_share = b.bound_ms / time_ms
    return b

