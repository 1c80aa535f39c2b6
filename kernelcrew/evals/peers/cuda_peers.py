"""The CUDA kernels' peers, on a device, in one run (`python -m kernelcrew.evals.peers.cuda_peers`).

Per operator, on its CUDA typical cases (op.yaml `backend_shapes.cuda`):
- the baseline.cu, and nvcc alone: the same .cu at -O3 with the default block (BLOCK=256),
  what the compiler makes of the source with nothing tuned (the library's baselines are
  written that way already: then it is the baseline, and is timed once);
- the hand-written fast kernel (tests/kernels/<op>/fast.cu) and the crew's best (a run's
  best.cu, when given);
- what a Python user gets for free: the op's CuPy expression (cupy_expressions.py: cuBLAS
  through `cupy.matmul`, CuPy's reductions, scans and elementwise kernels), timed in its own
  process with CUDA events, in the kernels' cache state, checked against the float64
  reference;
- the share of the device's copy bandwidth and of its spec-sheet FP32 rate each reaches.

The kernels are verified on every CUDA shape group and timed side by side in one harness
(`side_by_side.time_side_by_side`). Without a device every row says why it was not run.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from kernelcrew.evals.peers.common import (
    close_enough,
    make_inputs,
    reference_outputs,
    run_child,
    typical_cases,
)
from kernelcrew.evals.peers.cupy_expressions import CUPY_EXPRESSIONS
from kernelcrew.evals.peers.roofline import Peaks, bound_for, machine_peaks
from kernelcrew.evals.peers.side_by_side import fast_kernel_path, time_side_by_side
from kernelcrew.kernels.kernelfile import KernelFile, load_kernel
from kernelcrew.kernels.spec import DTYPES, LIBRARY, OpSpec, library_ops, load_op
from kernelcrew.tools.backends.backend import get_backend
from kernelcrew.tools.backends.cuda_runtime import repeats_for
from kernelcrew.tools.config import BenchSettings
from kernelcrew.tools.judge.harness import case_cache_state

NVCC_ALONE_FLAGS = ["-O3"]
DEFAULT_BLOCK = 256
KERNELS = ("baseline", "nvcc alone", "hand-written", "crew")
CUPY = "CuPy"


def nvcc_alone(kf: KernelFile) -> KernelFile:
    """The same .cu with nvcc doing all the work: -O3, and the default block where the file
    has a BLOCK knob (other knobs, e.g. tile sizes, are part of the source's design)."""
    knobs = {"BLOCK": DEFAULT_BLOCK} if "BLOCK" in kf.meta.knobs else None
    return kf.with_changes(flags=NVCC_ALONE_FLAGS, knobs=knobs)


def cuda_ops() -> list[str]:
    return [op for op in library_ops() if (LIBRARY / op / "baseline.cu").exists()]


# -- the CuPy peer -------------------------------------------------------------------------
@dataclass
class CupyCase:
    case: str
    expression: str
    median_ms: float | None
    p10_ms: float | None
    p90_ms: float | None
    correct: bool | None
    cache: str = "cold"
    runs_per_timing: int = 1


@dataclass
class CupyResult:
    op: str
    expression: str | None  # the fastest correct expression (the peer)
    cases: list[CupyCase] = field(default_factory=list)
    variants: dict[str, float] = field(default_factory=dict)  # expression -> typical ms
    typical_ms: float | None = None
    error: str = ""


def cupy_peer(op: str | Path | OpSpec, *, reps: int = 20, seed: int = 0,
              timeout_s: float = 600.0) -> CupyResult:
    """Time the op's CuPy expression(s) on its CUDA typical cases in a child process."""
    spec = load_op(op, "cuda")
    if spec.name not in CUPY_EXPRESSIONS:
        return CupyResult(spec.name, None, error=f"no CuPy expression for {spec.name}")
    be = get_backend("cuda")
    ok, why = be.can_run()
    if not ok:
        return CupyResult(spec.name, None, error=f"no device: {why}")
    l2 = be.cache_bytes()
    cases = typical_cases(spec)
    job = {"op": str(spec.folder), "reps": reps, "seed": seed, "l2_bytes": l2,
           "cases": [c.sizes for c in cases],
           "cache": [case_cache_state(BenchSettings().cache or spec.cache, l2,
                                      BenchSettings().input_sets * spec.cost_bytes(c.sizes))
                     for c in cases]}
    out = run_child("cupy", job, timeout_s, be.worker_env())
    if "error" in out:
        return CupyResult(spec.name, None, error=out["error"])
    return assemble_cupy(spec.name, out)


def assemble_cupy(op: str, out: dict) -> CupyResult:
    """The child's rows -> the peer: the fastest expression correct on every case."""
    res = CupyResult(op, None)
    best: tuple[float, str] | None = None
    for label, rows in out["variants"].items():
        if not all(r["correct"] for r in rows):
            continue
        res.variants[label] = total = sum(r["median_ms"] for r in rows)
        if best is None or total < best[0]:
            best = (total, label)
    if best is None:
        res.error = "no CuPy expression gave correct results"
        return res
    res.typical_ms, res.expression = best
    res.cases = [CupyCase(**r) for r in out["variants"][best[1]]]
    return res


class CupyDevice:
    """The child's device: CuPy arrays, one non-blocking stream, CUDA events around the
    timed calls, and the harness's L2 flush (a copy over twice the L2) outside them."""

    def __init__(self, l2_bytes: int | None) -> None:
        import cupy  # type: ignore[import-not-found]

        self.xp = cupy
        self.stream = cupy.cuda.Stream(non_blocking=True)
        self.stream.use()  # every CuPy call of this process runs on it, in order
        self.start, self.end = cupy.cuda.Event(), cupy.cuda.Event()
        n = max(2 * (l2_bytes or 0), 1 << 24) // 4
        self.flush_src = cupy.ones(n, dtype=cupy.float32)
        self.flush_dst = cupy.empty_like(self.flush_src)

    def asarray(self, a: np.ndarray) -> Any:
        return self.xp.asarray(a)

    def host(self, a: Any) -> np.ndarray:
        self.stream.synchronize()
        return self.xp.asnumpy(a)

    def timed(self, fn: Any, kw: dict, runs: int, cold: bool) -> float:
        """Milliseconds per call of `runs` back-to-back calls between one pair of events."""
        if cold:
            self.xp.copyto(self.flush_dst, self.flush_src)
        self.start.record(self.stream)
        for _ in range(runs):
            fn(self.xp, **kw)
        self.end.record(self.stream)
        self.end.synchronize()
        return float(self.xp.cuda.get_elapsed_time(self.start, self.end)) / runs


class HostStandIn:
    """NumPy in CuPy's place, the host clock in the events' (tests on a machine without a
    device run the child's logic through it)."""

    xp = np

    def __init__(self, l2_bytes: int | None = None) -> None:
        self.flush_buf = np.ones(max(2 * (l2_bytes or 0), 1 << 20) // 8)
        self.flushes = 0

    def asarray(self, a: np.ndarray) -> np.ndarray:
        return np.array(a, copy=True)

    def host(self, a: Any) -> np.ndarray:
        return np.asarray(a)

    def timed(self, fn: Any, kw: dict, runs: int, cold: bool) -> float:
        if cold:
            float(self.flush_buf.sum())
            self.flushes += 1
        t0 = time.perf_counter()
        for _ in range(runs):
            fn(np, **kw)
        return (time.perf_counter() - t0) * 1e3 / runs


def cupy_child(job: dict, device: Any = None) -> dict:
    """Per case and expression: correctness against the float64 reference, then `reps`
    timings alternating two input sets (3 warm-up calls first); a call shorter than the
    kernels' timing floor is timed as several back-to-back calls, as the kernels are."""
    dev = device or CupyDevice(job.get("l2_bytes"))
    spec = load_op(job["op"], "cuda")
    tol = spec.tolerance
    rng = np.random.default_rng(job["seed"])
    scalars = {n: DTYPES[s.dtype].type(s.value) for n, s in spec.scalars.items()}
    variants: dict[str, list[dict]] = {}
    states = job.get("cache") or ["cold"] * len(job["cases"])
    for sizes, state in zip(job["cases"], states, strict=True):
        host_sets = [make_inputs(spec, sizes, rng) for _ in range(2)]
        ref = reference_outputs(spec, sizes, host_sets[0])
        kws = [{**{k: dev.asarray(v) for k, v in s.items()}, **scalars, **sizes}
               for s in host_sets]
        del host_sets
        label = ",".join(f"{k}={v}" for k, v in sizes.items())
        for expr, fn in CUPY_EXPRESSIONS[spec.name]:
            got = fn(dev.xp, **kws[0])
            ok = all(close_enough(dev.host(got[n]), ref[n], tol.rtol, tol.atol)
                     for n in spec.outputs)
            del got
            for w in range(3):
                dev.timed(fn, kws[w % 2], 1, False)
            runs = repeats_for(dev.timed(fn, kws[0], 1, state == "cold"))
            times = [dev.timed(fn, kws[r % 2], runs, state == "cold")
                     for r in range(job["reps"])]
            variants.setdefault(expr, []).append({
                "case": label, "expression": expr, "median_ms": float(np.median(times)),
                "p10_ms": float(np.percentile(times, 10)),
                "p90_ms": float(np.percentile(times, 90)), "correct": ok, "cache": state,
                "runs_per_timing": runs})
    return {"variants": variants}


# -- one operator, every peer ----------------------------------------------------------------
@dataclass
class CudaPeerRow:
    op: str
    family: str = ""
    ms: dict[str, float | None] = field(default_factory=dict)  # label -> typical total ms
    case_ms: dict[str, dict[str, float]] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)
    cupy_expression: str | None = None
    # label -> {"bandwidth": share of the copy bandwidth, "compute": of the FP32 rate}
    shares: dict[str, dict[str, float | None]] = field(default_factory=dict)
    limit: str = ""  # bandwidth | compute: which peak bounds the typical cases
    notes: list[str] = field(default_factory=list)
    skipped: str = ""  # why nothing ran ("no device: ...")

    def ratio(self, a: str, b: str) -> float | None:
        """How many times faster `a` is than `b` (their typical totals)."""
        x, y = self.ms.get(a), self.ms.get(b)
        return y / x if x and y else None


def peers_of(op: str, *, crew_best: Path | None = None, reps: int = 10, rounds: int = 3,
             seed: int = 0, peaks: Peaks | None = None) -> CudaPeerRow:
    """Every peer of one op on this machine's device; a skipped row without one."""
    spec = load_op(op, "cuda")
    row = CudaPeerRow(spec.name, spec.family)
    ok, why = get_backend("cuda").can_run()
    if not ok:
        row.skipped = f"no device: {why}"
        return row
    base = load_kernel(spec.baseline_path("cuda"))
    kernels = {"baseline": base}
    alone = nvcc_alone(base)
    if alone.text == base.text:
        row.notes.append("nvcc alone is the baseline itself (already -O3, default block)")
    else:
        kernels["nvcc alone"] = alone
    fast = fast_kernel_path(spec.name, "cuda")
    if fast:
        kernels["hand-written"] = load_kernel(fast)
    if crew_best and crew_best.exists():
        kernels["crew"] = load_kernel(crew_best)
    timed = time_side_by_side(spec, kernels, reps=reps, rounds=rounds, seed=seed,
                              backend="cuda")
    for label, t in timed.items():
        row.ms[label] = t.typical_ms
        row.case_ms[label] = t.case_ms
        if t.error:
            row.errors[label] = t.error
    if "nvcc alone" not in kernels:
        row.ms["nvcc alone"] = row.ms.get("baseline")
    cp = cupy_peer(spec, reps=reps, seed=seed)
    row.cupy_expression = cp.expression
    row.ms[CUPY] = cp.typical_ms
    if cp.error:
        row.errors[CUPY] = cp.error
    fill_shares(row, spec, peaks or machine_peaks("cuda"))
    return row


def fill_shares(row: CudaPeerRow, spec: OpSpec, peaks: Peaks) -> None:
    """Each timed peer's share of the copy bandwidth and of the FP32 rate on the typical
    cases (the cost model's least bytes and FLOPs over its time)."""
    cases = [c.sizes for c in typical_cases(spec)]
    row.limit = bound_for(spec, cases, peaks).limit
    for label, ms in row.ms.items():
        if ms:
            b = bound_for(spec, cases, peaks, ms)
            row.shares[label] = {"bandwidth": b.bandwidth_share, "compute": b.compute_share}


def markdown(rows: list[CudaPeerRow], peaks_text: str = "") -> str:
    labels = [*KERNELS, CUPY]
    head = ["operator", *[f"{k} ms" for k in labels], "best share of copy bw / FP32",
            "hand-written vs CuPy"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        if r.skipped:
            lines.append(f"| {r.op} | " + " | ".join(["-"] * (len(head) - 2))
                         + f" | {r.skipped} |")
            continue
        cells = [f"{r.ms[k]:.4g}" if r.ms.get(k) else ("err" if k in r.errors else "-")
                 for k in labels]
        best = max((s for s in r.shares.values()),
                   key=lambda s: (s.get("bandwidth") or 0) + (s.get("compute") or 0),
                   default={})
        share = "/".join(f"{100 * v:.0f}%" if v else "-" for v in
                         (best.get("bandwidth"), best.get("compute")))
        vs = r.ratio("hand-written", CUPY)
        lines.append(f"| {r.op} | " + " | ".join(cells) + f" | {share} | "
                     + (f"{vs:.2f}x" if vs else "-") + " |")
    return "\n".join(lines) + (f"\n\nPeaks: {peaks_text}\n" if peaks_text else "\n")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m kernelcrew.evals.peers.cuda_peers",
                                 description="The CUDA kernels' peers on this device.")
    ap.add_argument("--ops", default="", help="comma-separated; default every CUDA op")
    ap.add_argument("--crew-runs", default="",
                    help="a folder with one optimize run folder per op (<op>/best.cu)")
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--out", default="", help="write the rows as JSON here")
    args = ap.parse_args(argv)
    known = cuda_ops()
    ops = [o for o in args.ops.split(",") if o] or known
    bad = [o for o in ops if o not in known]
    if bad:
        print(f"kernelcrew: --ops: {', '.join(bad)} has no CUDA baseline; use some of "
              f"{', '.join(known)}", file=sys.stderr)
        return 2
    ok, why = get_backend("cuda").can_run()
    peaks, peaks_text = None, ""
    if ok:
        try:
            peaks = machine_peaks("cuda")
            peaks_text = f"copy {peaks.gbps:.0f} GB/s ({peaks.source})"
        except RuntimeError as e:
            ok, why = False, f"the device's peaks could not be measured: {e}"
    rows = []
    for op in ops:
        if not ok:
            rows.append(CudaPeerRow(op, load_op(op).family, skipped=f"no device: {why}"))
            continue
        crew = Path(args.crew_runs) / op / "best.cu" if args.crew_runs else None
        t0 = time.monotonic()
        try:
            row = peers_of(op, crew_best=crew, reps=args.reps, rounds=args.rounds, peaks=peaks)
        except Exception as e:  # noqa: BLE001 - one op's failure must not lose the others
            row = CudaPeerRow(op, errors={"run": f"{type(e).__name__}: {e}"[:300]})
        row.notes.append(f"{time.monotonic() - t0:.0f} s")
        rows.append(row)
        print(json.dumps(asdict(row)), flush=True)
    if args.out:
        Path(args.out).write_text(json.dumps({"peaks": peaks_text, "device": ok,
                                              "rows": [asdict(r) for r in rows]}, indent=1))
    print(markdown(rows, peaks_text))
    return 0


if __name__ == "__main__":
    sys.exit(main())
