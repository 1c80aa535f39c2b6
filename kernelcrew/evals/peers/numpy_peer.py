"""The NumPy peer: the op's idiomatic NumPy expression, timed in its own process with the
kernels' thread count, checked against the op's float64 reference."""

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


@dataclass
class NumpyCase:
    case: str
    expression: str
    median_ms: float | None
    p10_ms: float | None
    p90_ms: float | None
    correct: bool | None


@dataclass
class NumpyResult:
    op: str
    expression: str | None  # the fastest correct expression (the peer)
    cases: list[NumpyCase] = field(default_factory=list)  # the peer's rows, typical cases
    variants: dict[str, float] = field(default_factory=dict)  # expression -> typical total ms
    typical_ms: float | None = None
    error: str = ""
    threads: str = ""


def numpy_peer(op: str | Path, *, reps: int = 10, seed: int = 0,
               timeout_s: float = 600.0) -> NumpyResult:
    """Time NumPy's idiom for the op's typical cases in a child process."""
    spec = load_op(op)
    if spec.name not in NUMPY_EXPRESSIONS:
        return NumpyResult(spec.name, None, error=f"no NumPy expression for {spec.name}")
    env = peer_env()
    job = {"op": str(spec.folder), "reps": reps, "seed": seed,
           "cases": [c.sizes for c in typical_cases(spec)]}
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
    return res


def numpy_child(job: dict) -> dict:
    spec = load_op(job["op"])
    tol = spec.tolerance
    rng = np.random.default_rng(job["seed"])
    variants: dict[str, list[dict]] = {}
    for sizes in job["cases"]:
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
            times = []
            for r in range(job["reps"]):
                t0 = time.perf_counter_ns()
                fn(**kws[r % 2])
                times.append((time.perf_counter_ns() - t0) / 1e6)
            variants.setdefault(expr, []).append({
                "case": label, "expression": expr, "median_ms": float(np.median(times)),
                "p10_ms": float(np.percentile(times, 10)),
                "p90_ms": float(np.percentile(times, 90)), "correct": ok})
    return {"variants": variants}

