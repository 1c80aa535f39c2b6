"""The bandwidth peak in the kernels' cache state, and the roofline share it gives.

The machine's triad peak (kernelcrew's peaks) is DRAM bandwidth on arrays twice the last-level
cache; an operator's typical case often moves less than that, its two input sets rotating
through the cache, so its kernels can beat "100% of peak". Here the peak is measured per
case: a triad (a = b + s * c) whose three arrays together are as large as the case's cost
bytes, and a read-only sweep (the max of three arrays as large), timed by the same harness
as the kernels (two input sets rotating, NaN-poisoned outputs, fresh workers), serial and
threaded, the faster counting. The case's bandwidth peak is the one for its mix of reads
and writes (`peaks.bandwidth_ceiling`: between the sweep, nothing written, and the triad, a
third written). The compute peak is the machine's FMA peak (it has no cache state).
"""

from __future__ import annotations

import math
import shutil
from dataclasses import dataclass
from pathlib import Path

import yaml

from kernelcrew.evals.peers.side_by_side import time_side_by_side
from kernelcrew.kernels.kernelfile import load_kernel
from kernelcrew.kernels.spec import OpSpec
from kernelcrew.tools.backends.peaks import bandwidth_ceiling

PROBE_DIR = Path(__file__).resolve().parent / "cache_peak"
BYTES_PER_ELEMENT = 12  # triad, float32: read b and c, write a


@dataclass
class CaseBound:
    case: str
    bytes: int
    flops: int
    gbps: float | None  # the bandwidth peak at this case's size and mix of reads and writes
    bound_ms: float | None  # max(bytes / gbps, flops / fma peak)
    triad_gbps: float | None = None  # the probes at this case's size
    read_gbps: float | None = None


# the two probes: kernel file, reference, output, and the bytes counted per element
PROBES = {
    "triad": ("triad.cpp", "reference.py", "a = b + s * c, the bandwidth probe",
              {"b": {"dtype": "float32", "shape": ["n"]}, "c": {"dtype": "float32", "shape": ["n"]}},
              {"a": {"dtype": "float32", "shape": ["n"]}}, {"s": {"dtype": "float32", "value": 3.0}},
              BYTES_PER_ELEMENT),
    "sweep": ("sweep.cpp", "sweep_reference.py", "m = max(b, c, d), the read-only bandwidth probe",
              {k: {"dtype": "float32", "shape": ["n"]} for k in "bcd"},
              {"m": {"dtype": "float32", "shape": [1]}}, {}, BYTES_PER_ELEMENT),
}


def probe_folder(sizes: list[int], dest: Path, kind: str = "triad") -> Path:
    """An operator folder for a bandwidth probe (`triad` or `sweep`) whose typical cases have
    these lengths."""
    kernel, ref, what, inputs, outputs, scalars, per_element = PROBES[kind]
    folder = dest / kind
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    shutil.copyfile(PROBE_DIR / ref, folder / "reference.py")
    shutil.copyfile(PROBE_DIR / kernel, folder / "baseline.cpp")
    spec = {
        "name": kind, "description": what, "family": "probe", "sizes": ["n"],
        "inputs": inputs, "outputs": outputs, "scalars": scalars,
        "cost": {"bytes": f"{per_element}*n", "flops": "2*n" if kind == "triad" else "n"},
        "tolerance": {"rtol": 1.0e-6, "atol": 1.0e-6},
        "shapes": {"typical": {"weight": 1.0, "cases": [{"n": n} for n in sizes]},
                   "boundary": {"weight": 0.25, "cases": [{"n": 1}]},
                   "unaligned": {"weight": 0.5, "cases": [{"n": 1001}]}},
        "baselines": {"cpu": "baseline.cpp"},
    }
    (folder / "op.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    return folder


def probe_gbps(kind: str, sizes: list[int], work: Path, *, reps: int, seed: int
               ) -> list[float | None]:
    """The probe's bandwidth (counted bytes per second) at each of these lengths, serial or
    threaded, whichever is faster (None where it did not run correctly)."""
    per_element = PROBES[kind][-1]
    folder = probe_folder(sizes, work, kind)
    kf = load_kernel(folder / "baseline.cpp")
    timed = time_side_by_side(folder, {"serial": kf.with_changes(knobs={"THREADED": 0}),
                                       "threaded": kf.with_changes(knobs={"THREADED": 1})},
                              reps=reps, seed=seed)
    out: list[float | None] = []
    for n in sizes:
        ms = [t.case_ms[f"n={n}"] for t in timed.values() if t.correct and f"n={n}" in t.case_ms]
        out.append(per_element * n / (min(ms) * 1e-3) / 1e9 if ms else None)
    return out


def case_bounds(spec: OpSpec, fma_gflops: float | None, work: Path, *, reps: int = 10,
                seed: int = 0) -> list[CaseBound]:
    """The roofline bound of each typical case, the bandwidths measured at its size."""
    typical = [c for c in spec.cases() if c.group == "typical"]
    dest = work / f"probe-{spec.name}"
    triad = probe_gbps("triad", [max(1, math.ceil(spec.cost_bytes(c.sizes) / BYTES_PER_ELEMENT))
                                 for c in typical], dest, reps=reps, seed=seed)
    read = probe_gbps("sweep", [max(1, math.ceil(spec.cost_bytes(c.sizes) / BYTES_PER_ELEMENT))
                                for c in typical], dest, reps=reps, seed=seed)
    out = []
    for c, t, r in zip(typical, triad, read, strict=True):
        nbytes, flops = spec.cost_bytes(c.sizes), spec.cost_flops(c.sizes)
        written = spec.written_share(c.sizes)
        gbps = (bandwidth_ceiling(t, r, written) if t and written is not None else t)
        bound = None
        if gbps:
            bound = nbytes / (gbps * 1e9) * 1e3
            if fma_gflops:
                bound = max(bound, flops / (fma_gflops * 1e9) * 1e3)
        out.append(CaseBound(c.label, nbytes, flops, gbps, bound, t, r))
    return out


def roofline_share(bounds: list[CaseBound], case_ms: dict[str, float]) -> float | None:
    """Least time the peaks allow for the typical cases over the time taken (both summed)."""
    if not bounds or any(b.bound_ms is None or b.case not in case_ms for b in bounds):
        return None
    return sum(b.bound_ms for b in bounds) / sum(case_ms[b.case] for b in bounds)
