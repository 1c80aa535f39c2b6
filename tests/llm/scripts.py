"""What the scripted LLM says, and the agent context the tests give it.

The kernels are real: `FAST_VADD` compiles and is correct and faster than the baseline;
`BROKEN_VADD` does not compile (a missing semicolon), which the graph's compile step
reports back to its author.
"""

from __future__ import annotations

from pathlib import Path

from kernelcrew.agents.context import AgentContext, IterationNote
from kernelcrew.results import Diagnosis, HotRegion, Metric, ProfileResult, Roofline

HERE = Path(__file__).resolve().parent
OPS = HERE.parent / "ops"
VADD_BASELINE = (OPS / "vadd" / "baseline.cpp").read_text()

FAST_VADD = """/* kernelcrew
entry: vadd
flags: [-O3, -march=native]
*/
#include <cstdint>
// restrict: x, z and y never alias, so the loop vectorizes without runtime checks
extern "C" void vadd(const float* __restrict__ x, const float* __restrict__ z,
                     float* __restrict__ y, int64_t n) {
#pragma GCC ivdep
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] + z[i];
}
"""

BROKEN_VADD = """/* kernelcrew
entry: vadd
flags: [-O3, -march=native]
*/
#include <cstdint>
extern "C" void vadd(const float* __restrict__ x, const float* __restrict__ z,
                     float* __restrict__ y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] + z[i]
}
"""

PLAN = {
    "bottleneck": "The loop is scalar: the compiler cannot prove x, z and y do not alias, "
                  "so at -O2 it does not vectorize. Bandwidth is at 21% of peak.",
    "plan": "1. Mark x, z, y __restrict__. 2. Compile with -O3 -march=native so the loop "
            "uses the widest vectors.",
    "kind": "restrict",
    "change_type": "source",
    "expected_gain": 2.0,
    "risks": "None for correctness; the gain is capped by memory bandwidth.",
    "confidence": 0.8,
}

REPLAN = {**PLAN, "plan": "1. Keep the loop as it is and only add __restrict__ and "
                          "-O3 -march=native (simpler; nothing else changes).",
          "kind": "restrict_simple"}


def code(kernel: str = FAST_VADD, gain: float = 2.0) -> dict:
    return {"kernel": kernel, "expected_gain": gain, "risks": "bandwidth-bound",
            "confidence": 0.8}


def profile() -> ProfileResult:
    """A CPU-like profile with memory, loop and vectorization metrics (and two ncu names)."""
    m = {
        "device": Metric(value=None, unit="", reason="test cpu"),
        "time_ms": Metric(value=0.12, unit="ms", reason="median of 6 runs"),
        "achieved_bandwidth": Metric(value=4.1, unit="GB/s", reason="cost model bytes / time"),
        "peak_bandwidth": Metric(value=19.5, unit="GB/s", reason="STREAM triad"),
        "bandwidth_pct": Metric(value=21.0, unit="%"),
        "hot_loop_stride": Metric(value=1, unit="elements", reason="x[] stride 1 at line 7"),
        "l2_hit_rate": Metric(value=None, unit="%", reason="no L2 events"),
        "threads_launched": Metric(value=1, unit="threads", reason="serial (no -fopenmp)"),
        "threads_busy": Metric(value=1, unit="threads"),
        "ipc": Metric(value=1.7, unit="instr/cycle", reason="perf stat"),
        "hot_loop_vector_bytes": Metric(value=0, unit="bytes",
                                        reason="line 7: not vectorized (possible aliasing)"),
        "achieved_occupancy_pct": Metric(value=55.0, unit="%", reason="ncu"),
        "l1_ld_sectors_per_request": Metric(value=4.0, unit="sectors", reason="ncu"),
    }
    return ProfileResult(
        op="vadd", kernel="best.cpp", backend="cpu", case="typical[0]", source="cpu",
        summary="threads 1/2 (serial) | BW 4.1 of 19.5 GB/s (21%) | stride: x,z,y 1 | "
                "L2 hit n/a | vec: l.7 not vectorized (aliasing) | occupancy 1/2 | hot: l.7 97%",
        metrics=m,
        bottleneck=Diagnosis(kind="latency-bound", evidence="21% of peak bandwidth with one "
                                                            "thread and a scalar loop"),
        roofline=Roofline(time_ms=0.12, bytes=2400000, flops=200000, achieved_gbps=4.1,
                          peak_gbps=19.5, achieved_gflops=1.7, peak_gflops=80.0,
                          bandwidth_share=0.21, compute_share=0.02, intensity=0.083,
                          bound_ms=0.025),
        hot_regions=[HotRegion(where="line 7", share=0.97,
                               what="for (int64_t i = 0; i < n; ++i) y[i] = x[i] + z[i];")])


def vadd_context(run_dir: str | None = None, **over: object) -> AgentContext:
    base: dict = {
        "op": "vadd", "family": "elementwise", "description": "y = x + z", "backend": "cpu",
        "signature": "x (input), z (input), y (output), n (size)",
        "tolerance": "rtol=1e-05, atol=1e-06", "kernel": VADD_BASELINE,
        "kernel_is_baseline": True, "profile": profile(),
        "recent": [IterationNote(iteration=1, author="loop", kind="unroll", outcome="same",
                                 speedup=1.02, detail="1.02x is inside the noise band")],
        "tried": ["fusion by memory_access: rejected"],
        "reflections": ["[vadd/restrict/accepted 1.80x] restrict let g++ vectorize the add"],
        "change_stats": {"restrict": {"tried": 2, "accepted": 1, "mean_speedup": 1.6}},
        "iteration": 2, "run_dir": run_dir}
    base.update(over)
    return AgentContext(**base)
