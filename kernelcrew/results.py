"""Typed results of the measuring tools. A failed compile or a wrong kernel is data."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

Status = Literal["pass", "fail", "pending"]
Verdict = Literal["faster", "slower", "same", "rejected"]


class CompilerMessage(BaseModel):
    line: int | None  # line in the kernel file (front matter counted), None if unknown
    kind: str  # error | warning | note | fatal
    message: str


class KernelResources(BaseModel):
    """Per-kernel resources reported by ptxas (CUDA)."""

    kernel: str
    registers: int | None = None
    spill_stores_bytes: int | None = None
    spill_loads_bytes: int | None = None
    stack_bytes: int | None = None
    shared_bytes: int | None = None
    constant_bytes: int | None = None


class CompileResult(BaseModel):
    ok: bool
    artifact: str | None = None  # path of the .so / .cubin
    command: list[str] = Field(default_factory=list)
    seconds: float = 0.0
    cached: bool = False
    messages: list[CompilerMessage] = Field(default_factory=list)  # normalized diagnostics
    log: str = ""  # trimmed compiler output
    resources: list[KernelResources] = Field(default_factory=list)
    reason: str = ""  # one line when not ok

    def feedback(self, max_lines: int = 50) -> str:
        """What goes back to the author of a failed candidate."""
        head = "\n".join(f"line {m.line}: {m.kind}: {m.message}" for m in self.messages[:10])
        tail = "\n".join(self.log.splitlines()[-max_lines:])
        return f"{self.reason}\n{head}\n--- last lines of the compiler output ---\n{tail}"


class CaseRow(BaseModel):
    """One shape case of one kernel: correctness and timing."""

    group: str
    case: str  # "rows=1,cols=3"
    sizes: dict[str, int]
    status: Status
    max_abs_err: float | None = None
    max_rel_err: float | None = None
    detail: str = ""  # why it failed: which output, which indices
    failing_indices: list[list[int]] = Field(default_factory=list)
    # what a wrong result looked like, as data (feedback to an author is built from these,
    # never from `detail`, which may say how the judge found it): the output that failed,
    # where its worst element is, what the kernel wrote there and what the reference says
    output: str | None = None
    worst_index: list[int] | None = None
    got: float | None = None
    want: float | None = None
    # the kind of failure: wrong-values | unwritten | nan-inf | shape | modified-inputs |
    # crash | timeout | integrity (the judge's own checks) | not-run
    cause: str | None = None
    median_ms: float | None = None
    p10_ms: float | None = None
    p90_ms: float | None = None
    baseline_ms: float | None = None
    speedup: float | None = None
    runs_per_timing: int = 1  # >1: a short plan timed as that many back-to-back runs
    samples_ms: list[float] = Field(default_factory=list, exclude=True)


class WorkerOutcome(BaseModel):
    """What the parent concluded about one worker process."""

    ok: bool
    reason: str = ""  # crash / timeout / exit code, one line
    seconds: float = 0.0
    sandbox: str = ""  # how the worker was confined


class CheckResult(BaseModel):
    """`kernelcrew check`: correctness on every group, then timing against the baseline."""

    op: str
    kernel: str
    backend: str
    correct: bool | None  # None: compiled only, not run (no device)
    verdict: Verdict
    speedup: float | None
    reason: str
    noise_band: float | None = None  # the band the gate used: max(min_speedup, measured_noise)
    measured_noise: float | None = None  # the spread of the speedup this run measured
    min_speedup: float | None = None  # the minimum threshold (--min-speedup)
    rounds: int | None = None  # alternating rounds the noise was measured over
    cache: dict[str, str] = Field(default_factory=dict)  # case -> cold | warm
    ran: bool = True  # False when the backend could only compile (no device)
    rows: list[CaseRow] = Field(default_factory=list)
    compile: CompileResult | None = None
    sandbox: str = ""
    group_speedups: dict[str, float] = Field(default_factory=dict)
    suspicious: bool = False  # faster than the roofline allows


Bottleneck = Literal["memory-bound", "compute-bound", "latency-bound", "launch-bound"]


class Metric(BaseModel):
    """A named measurement: a number with its unit, or None with the reason."""

    value: float | None
    unit: str
    reason: str = ""  # why value is None (one or two words), or where it came from


class Diagnosis(BaseModel):
    kind: Bottleneck
    evidence: str  # the numbers that decided it, one or two sentences
    access_pattern: str = "unknown"  # CPU: good | poor | tiled | unknown (strides of hot loops)
    measured: bool = True  # False: inferred from the cost model only (compiled, not run)


class Roofline(BaseModel):
    """Achieved rates from the op's cost model and the measured time, against the peaks."""

    time_ms: float
    bytes: int
    flops: int
    achieved_gbps: float
    peak_gbps: float | None
    achieved_gflops: float
    peak_gflops: float | None
    bandwidth_share: float | None  # achieved / peak
    compute_share: float | None
    intensity: float  # flops per byte
    bound_ms: float | None  # the least time the peaks allow for this case


class HotRegion(BaseModel):
    where: str  # "line 12" or "kernel k line 40"
    share: float | None  # fraction of samples / time, when known
    what: str = ""  # the source text or the SASS instruction


class ProfileResult(BaseModel):
    """A profile of one kernel on one representative case, as a short structured summary."""

    op: str
    kernel: str
    backend: str
    case: str  # the shape case profiled
    cache: str = ""  # cold | warm: the cache state the timings (and shares) are for
    source: str  # "cpu", "ncu", "cuda-fallback", "compile-only"
    summary: str  # fixed template, at most 600 characters
    metrics: dict[str, Metric] = Field(default_factory=dict)
    bottleneck: Diagnosis
    roofline: Roofline | None = None
    hot_regions: list[HotRegion] = Field(default_factory=list)
    compile_report: str = ""  # the compiler's own words: vectorization (CPU), ptxas (CUDA)
