"""The bandwidth peak in the kernels' cache state, and the roofline share it gives.

The machine's triad peak (kernelcrew's peaks) is DRAM bandwidth on arrays twice the last-level
cache; an operator's typical case often moves less than that, its two input sets rotating
through the cache, so its kernels can beat "100% of peak". Here the peak is measured per
case: a triad (a = b + s * c) whose three arrays together are as large as the case's cost
bytes, timed by the same harness as the kernels (two input sets rotating, NaN-poisoned
outputs, fresh workers), serial and threaded, the faster counting. The compute peak is the
machine's FMA peak (it has no cache state).
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

PROBE_DIR = Path(__file__).resolve().parent / "cache_peak"
BYTES_PER_ELEMENT = 12  # triad, float32: read b and c, write a


@dataclass
class CaseBound:
    case: str
    bytes: int
    flops: int
    gbps: float | None  # the probe's bandwidth at this case's size
    bound_ms: float | None  # max(bytes / gbps, flops / fma peak)


def probe_folder(sizes: list[int], dest: Path) -> Path:
    """An operator folder for the triad probe whose typical cases have these lengths."""
    folder = dest / "triad"
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    shutil.copyfile(PROBE_DIR / "reference.py", folder / "reference.py")
    shutil.copyfile(PROBE_DIR / "triad.cpp", folder / "baseline.cpp")
    spec = {
        "name": "triad", "description": "a = b + s * c, the bandwidth probe", "family": "probe",
        "sizes": ["n"],
        "inputs": {"b": {"dtype": "float32", "shape": ["n"]},
                   "c": {"dtype": "float32", "shape": ["n"]}},
        "outputs": {"a": {"dtype": "float32", "shape": ["n"]}},
        "scalars": {"s": {"dtype": "float32", "value": 3.0}},
        "cost": {"bytes": f"{BYTES_PER_ELEMENT}*n", "flops": "2*n"},
        "tolerance": {"rtol": 1.0e-6, "atol": 1.0e-6},
        "shapes": {"typical": {"weight": 1.0, "cases": [{"n": n} for n in sizes]},
                   "boundary": {"weight": 0.25, "cases": [{"n": 1}]},
                   "unaligned": {"weight": 0.5, "cases": [{"n": 1001}]}},
        "baselines": {"cpu": "baseline.cpp"},
    }
    (folder / "op.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    return folder


def case_bounds(spec: OpSpec, fma_gflops: float | None, work: Path, *, reps: int = 10,
                seed: int = 0) -> list[CaseBound]:
    """The roofline bound of each typical case, the bandwidth measured at its size."""
    typical = [c for c in spec.cases() if c.group == "typical"]
    sizes = [max(1, math.ceil(spec.cost_bytes(c.sizes) / BYTES_PER_ELEMENT)) for c in typical]
    folder = probe_folder(sizes, work / f"probe-{spec.name}")
    kf = load_kernel(folder / "baseline.cpp")
    timed = time_side_by_side(folder, {"serial": kf.with_changes(knobs={"THREADED": 0}),
                                       "threaded": kf.with_changes(knobs={"THREADED": 1})},
                              reps=reps, seed=seed)
    out = []
    for c, n in zip(typical, sizes, strict=True):
        label = f"n={n}"
        ms = [t.case_ms[label] for t in timed.values() if t.correct and label in t.case_ms]
        gbps = BYTES_PER_ELEMENT * n / (min(ms) * 1e-3) / 1e9 if ms else None
        nbytes, flops = spec.cost_bytes(c.sizes), spec.cost_flops(c.sizes)
        bound = None
        if gbps:
            bound = nbytes / (gbps * 1e9) * 1e3
            if fma_gflops:
                bound = max(bound, flops / (fma_gflops * 1e9) * 1e3)
        out.append(CaseBound(c.label, nbytes, flops, gbps, bound))
    return out


def roofline_share(bounds: list[CaseBound], case_ms: dict[str, float]) -> float | None:
    """Least time the peaks allow for the typical cases over the time taken (both summed)."""
    if not bounds or any(b.bound_ms is None or b.case not in case_ms for b in bounds):
        return None
    return sum(b.bound_ms for b in bounds) / sum(case_ms[b.case] for b in bounds)
