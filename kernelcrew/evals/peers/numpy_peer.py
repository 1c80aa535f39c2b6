"""The NumPy peer: the op's idiomatic NumPy expression, timed in its own process with the
kernels' thread count and in the kernels' cache state, checked against the op's float64
reference.

The cache state is the harness's rule (`case_cache_state`): where the kernels' timed calls
follow a flush of the last-level cache (a case whose two input sets do not fit in half of
it), each timed NumPy call follows the same flush, outside the clock. Called back to back
instead, NumPy would find much of a 16 MB case still in a 32 MB cache and be timed on a
warmer machine than the kernels it is compared with; that time is kept too
(`no_flush_ms`), for the report."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from kernelcrew.evals.peers.common import (
    close_enough,
    make_inputs,
    peer_env,
    reference_outputs,
    run_child,
    typical_cases,
)
from kernelcrew.evals.peers.numpy_expressions import NUMPY_EXPRESSIONS
from kernelcrew.kernels.spec import DTYPES, load_op
from kernelcrew.tools.backends.cpu import llc_bytes
from kernelcrew.tools.config import BenchSettings
from kernelcrew.tools.judge.harness import case_cache_state


@dataclass
class NumpyCase:
    case: str
    expression: str
    median_ms: float | None
    p10_ms: float | None
    p90_ms: float | None
    correct: bool | None
    cache: str = "warm"  # the kernels' cache state for this case: cold = flushed per call
    no_flush_ms: float | None = None  # a cold case called back to back, no flush (median)


@dataclass
class NumpyResult:
    op: str
    expression: str | None  # the fastest correct expression (the peer)
    cases: list[NumpyCase] = field(default_factory=list)  # the peer's rows, typical cases
    variants: dict[str, float] = field(default_factory=dict)  # expression -> typical total ms
    typical_ms: float | None = None
    error: str = ""
    threads: str = ""
    no_flush_ms: float | None = None  # the peer's total with its cold cases not flushed


def numpy_peer(op: str | Path, *, reps: int = 10, seed: int = 0,
               timeout_s: float = 600.0) -> NumpyResult:
    """Time NumPy's idiom for the op's typical cases in a child process."""
    spec = load_op(op)
    if spec.name not in NUMPY_EXPRESSIONS:
        return NumpyResult(spec.name, None, error=f"no NumPy expression for {spec.name}")
    env = peer_env()
    bench = BenchSettings()
    cases = typical_cases(spec)
    job = {"op": str(spec.folder), "reps": reps, "seed": seed,
           "cases": [c.sizes for c in cases], "llc_bytes": llc_bytes(),
           "cache": [case_cache_state(bench.cache or spec.cache, llc_bytes(),
                                      bench.input_sets * spec.cost_bytes(c.sizes))
                     for c in cases]}
    out = run_child("numpy", job, timeout_s, env)
    if "error" in out:
        return NumpyResult(spec.name, None, error=out["error"])
    res = NumpyResult(spec.name, None, threads=f"OMP/BLAS threads {env['OMP_NUM_THREADS']}")
    best: tuple[float, str] | None = None
    for label, rows in out["variants"].items():
        total = sum(r["median_ms"] for r in rows) if all(r["correct"] for r in rows) else None
        if total is not None:
            res.variants[label] = total
            if best is None or total < best[0]:
                best = (total, label)
    if best is None:
        res.error = "no NumPy expression gave correct results"
        return res
    res.typical_ms, res.expression = best
    res.cases = [NumpyCase(**r) for r in out["variants"][best[1]]]
    res.no_flush_ms = sum(c.no_flush_ms if c.no_flush_ms is not None else c.median_ms
                          for c in res.cases)
    return res


def numpy_child(job: dict) -> dict:
    spec = load_op(job["op"])
    tol = spec.tolerance
    rng = np.random.default_rng(job["seed"])
    variants: dict[str, list[dict]] = {}
    llc = job.get("llc_bytes") or 0
    # the worker's flush: a sweep over twice the last-level cache
    flush_buf = np.ones(max(2 * llc, 1 << 20) // 8, dtype=np.uint64)
    states = job.get("cache") or ["warm"] * len(job["cases"])
    for sizes, state in zip(job["cases"], states, strict=True):
        sets = [make_inputs(spec, sizes, rng) for _ in range(2)]
        ref = reference_outputs(spec, sizes, sets[0])
        scalars = {n: DTYPES[s.dtype].type(s.value) for n, s in spec.scalars.items()}
        label = ",".join(f"{k}={v}" for k, v in sizes.items())
        for expr, fn in NUMPY_EXPRESSIONS[spec.name]:
            kws = [{**s, **scalars, **sizes} for s in sets]
            got = fn(**kws[0])
            ok = all(close_enough(got[n], ref[n], tol.rtol, tol.atol) for n in spec.outputs)
            for w in range(3):
                fn(**kws[w % 2])
            times = _timed(fn, kws, job["reps"], flush_buf if state == "cold" else None)
            back_to_back = _timed(fn, kws, job["reps"], None) if state == "cold" else None
            variants.setdefault(expr, []).append({
                "case": label, "expression": expr, "median_ms": float(np.median(times)),
                "p10_ms": float(np.percentile(times, 10)),
                "p90_ms": float(np.percentile(times, 90)), "correct": ok, "cache": state,
                "no_flush_ms": float(np.median(back_to_back)) if back_to_back else None})
    return {"variants": variants}


def _timed(fn, kws: list[dict], reps: int, flush_buf: np.ndarray | None) -> list[float]:
    """Milliseconds of `reps` calls alternating the input sets; with `flush_buf`, each call
    follows a sweep over it (outside the clock), as the kernels' cold timed calls do."""
    times = []
    for r in range(reps):
        if flush_buf is not None:
            int(flush_buf.sum())
        t0 = time.perf_counter_ns()
        fn(**kws[r % 2])
        times.append((time.perf_counter_ns() - t0) / 1e6)
    return times
