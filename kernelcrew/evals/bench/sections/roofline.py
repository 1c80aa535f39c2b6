"""Part 5c: achieved rates of the crew's best kernels against the machine peaks (DRAM triad
and FMA, measured at the start)."""

from __future__ import annotations

import math
from typing import Any

from kernelcrew.evals import peers as P
from kernelcrew.evals import suite as S
from kernelcrew.evals.bench.section import BenchRun, Section, fmt, status
from kernelcrew.kernels.spec import load_op

BANDWIDTH_TARGET = 0.70  # issue 8: memory-bound ops reach 70% of the measured peak
_f = fmt


def roofline_rows(suite: S.SuiteResult, peaks: P.Peaks) -> tuple[list[list[str]], dict]:
    rows, shares = [], {}
    bal = peaks.gflops / peaks.gbps if peaks.gflops else math.inf
    for r in suite.rows:
        if not r.best_ms:
            continue
        spec = load_op(r.op)
        b = P.bound_for(spec, [c.sizes for c in P.typical_cases(spec)], peaks, r.best_ms)
        intensity = b.flops / b.bytes if b.bytes else math.inf
        memory_bound = intensity < bal
        if memory_bound:
            shares[r.op] = b.bandwidth_share
        rows.append([r.op, f"{intensity:.2f}", "bandwidth" if memory_bound else "compute",
                     _f(b.achieved_gbps, "{:.1f}"), _f(b.bandwidth_share, "{:.0%}"),
                     _f(b.achieved_gflops, "{:.1f}"), _f(b.compute_share, "{:.0%}"),
                     _f(b.bound_share, "{:.0%}")])
    return rows, shares



def run(b: BenchRun) -> None:
    suite, peaks = b.data.get("suite"), b.data.get("peaks")
    if suite and peaks:
        b.data["roofline_rows"], b.data["bandwidth_shares"] = roofline_rows(suite, peaks)


def render(data: dict[str, Any]) -> list[str]:
    L: list[str] = []
    add = L.append
    _f = fmt
    peaks: P.Peaks | None = data.get("peaks")
    add("### 5c. The physical bound\n")
    if peaks:
        bal = peaks.gflops / peaks.gbps if peaks.gflops else None
        add(f"Achieved rates of the crew's best kernel on the typical cases, from the op's cost "
            f"model (least bytes and flops any version must move) and the best time, against "
            f"the peaks measured at the start (triad {peaks.gbps:.1f} GB/s, read-only sweep "
            f"{_f(peaks.read_gbps, '{:.1f}')} GB/s, FMA {peaks.gflops:.0f} GFLOP/s; machine "
            f"balance {_f(bal, '{:.1f}')} flop/byte). An op whose cost-model intensity is "
            "below the balance is memory-bound. Each case's bandwidth peak is the one for "
            "its mix of reads and writes (between the read sweep, which writes nothing, and "
            "the triad, which writes a third of its bytes; a GEMV writes almost nothing). "
            "These peaks are DRAM bandwidth (arrays of twice the last-level cache); the typical cases "
            f"of these ops move far less data than that and the "
            f"{_f(data.get('llc_mib'), '{:.0f}')} MiB last-level cache holds much of it, so a "
            "share above 100% means the case ran from cache.\n")
        add(S.markdown_table(["operator", "intensity flop/B", "bound by", "GB/s",
                              "of peak BW", "GFLOP/s", "of peak FLOP/s", "roofline reached"],
                             data.get("roofline_rows", [])))
        add("")
    return L


def goals(data: dict[str, Any]) -> list[list[str]]:
    rr = data.get("bandwidth_shares", {})
    if not rr:
        return []
    low = {op: s for op, s in rr.items() if s is None or s < BANDWIDTH_TARGET}
    return [["memory-bound ops reach >= 70% of measured peak bandwidth (8)",
             f"{len(rr)} of {len(rr)} memory-bound ops",
             ", ".join(f"{op} {fmt(s, '{:.0%}')}" for op, s in rr.items()),
             status(not low, "; ".join(f"{op} {(BANDWIDTH_TARGET - (s or 0)) * 100:.0f}"
                                       " points short" for op, s in low.items()))]]


SECTION = Section("roofline", render, run, goals, needs=("suite",))
