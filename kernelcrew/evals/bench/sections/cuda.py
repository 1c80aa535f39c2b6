"""Part 8: the CUDA kernels and their peers on a device (kernelcrew.evals.peers.cuda_peers):
per op with a baseline.cu, the baseline, nvcc alone, the hand-written fast.cu and the op's
CuPy expression on the CUDA shape groups, with their shares of the device's copy bandwidth
and FP32 rate. Without a device the part says so and measures nothing."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from kernelcrew.evals.bench.section import BenchRun, Section, status
from kernelcrew.evals.peers.cuda_peers import CUPY, CudaPeerRow, cuda_ops, markdown, peers_of
from kernelcrew.evals.peers.roofline import machine_peaks
from kernelcrew.tools.backends.backend import get_backend

BANDWIDTH_GOAL = 0.85  # issue 43: memory-bound kernels at 85% of the copy bandwidth


def run(b: BenchRun) -> None:
    ok, why = get_backend("cuda").can_run()
    if not ok:
        b.data["cuda"] = {"skipped": f"no device: {why}", "rows": []}
        return
    peaks = machine_peaks("cuda")
    rows = []
    for op in [o for o in b.ops if o in cuda_ops()]:
        b.say(f"part cuda: {op} (baseline, nvcc alone, hand-written, CuPy)")
        rows.append(asdict(peers_of(op, reps=b.settings.reps, peaks=peaks)))
    b.data["cuda"] = {"skipped": "", "rows": rows, "peaks": peaks.source,
                      "copy_gbps": peaks.gbps, "fp32_gflops": peaks.gflops}


def _rows(data: dict[str, Any]) -> list[CudaPeerRow]:
    return [CudaPeerRow(**r) for r in (data.get("cuda") or {}).get("rows", [])]


def render(data: dict[str, Any]) -> list[str]:
    part = data.get("cuda")
    lines = ["## 8. CUDA kernels and their peers\n"]
    if not part:
        return lines + ["Not measured (part skipped).\n"]
    if part.get("skipped"):
        return lines + [(f"Not measured: {part['skipped']}. `scripts/gpu_check.sh` runs the "
                        "same peers on a GPU machine (docs/gpu-validation.md).\n")]
    lines.append("Per operator, on its CUDA typical cases: the baseline.cu, nvcc alone (the same "
                 ".cu at -O3 with the default block), the hand-written fast.cu and the op's "
                 "CuPy expression (cuBLAS through cupy.matmul, CuPy's reductions, scans and "
                 "elementwise kernels), times summed over the typical cases; the share is the "
                 "best kernel's of the copy bandwidth / the spec-sheet FP32 rate.\n")
    lines.append(markdown(_rows(data), part.get("peaks", "")))
    return lines


def goals(data: dict[str, Any]) -> list[list[str]]:
    rows = [r for r in _rows(data) if not r.skipped]
    if not rows:
        return []
    mem = [r for r in rows if r.limit == "bandwidth"]
    met = [r for r in mem if ((r.shares.get("hand-written") or {}).get("bandwidth") or 0)
           >= BANDWIDTH_GOAL]
    ahead = [r for r in rows if (r.ratio("hand-written", CUPY) or 0) > 1]
    n_mem = f"{len(mem)} of {len(mem)}"
    return [["hand-written CUDA kernels at 85% of the copy bandwidth (43)", n_mem,
             f"{len(met)} of {len(mem)}", status(len(met) == len(mem), "")],
            ["hand-written CUDA kernels ahead of CuPy (43)", f"most of {len(rows)}",
             f"{len(ahead)} of {len(rows)}", status(2 * len(ahead) > len(rows), "")]]


SECTION = Section("cuda", render, run, goals)
