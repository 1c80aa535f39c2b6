"""Peers the crew is measured against, on the same machine in the same run.

- Kernel Tuner (its C backend) searching the knob space a tunable kernel file declares:
  how many evaluations each strategy needs to come within 5% of the brute-force optimum.
- NumPy's idiomatic expression of each operator, timed in its own process.
- The physical bound: achieved bandwidth / FLOP/s as a share of the machine peaks.

Kernel Tuner and NumPy run in child processes (`python -m kernelcrew.evals.peers kt|numpy
JOB.json`), so nothing they load stays in the caller and their timing is not disturbed by
the caller's own work.
"""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from kernelcrew.errors import InputError
from kernelcrew.kernels.kernelfile import KernelFile, load_kernel
from kernelcrew.kernels.spec import DTYPES, Case, OpSpec, load_op
from kernelcrew.tools.backends.backend import get_backend
from kernelcrew.tools.backends.cpu import cpu_threads
from kernelcrew.tools.backends.peaks import cpu_peaks, cuda_peaks

TUNABLE_DIR = Path(__file__).resolve().parent / "tunable"
STRATEGIES = ("brute_force", "random_sample", "genetic_algorithm", "bayes_opt")
WITHIN = 0.05  # "within 5% of the brute-force optimum"
PEER_TIMEOUT_S = 900.0  # one child process (all of one op's Kernel Tuner searches)
_SPACE = re.compile(r"^\s*//\s*knob space:\s*(\{.*\})\s*$", re.MULTILINE)
_C_TYPES = {"float32": "float", "float64": "double", "float16": "uint16_t", "int32": "int32_t",
            "int64": "int64_t"}


# ---------------------------------------------------------------- shared helpers


def make_inputs(spec: OpSpec, sizes: dict[str, int], rng: np.random.Generator
                ) -> dict[str, np.ndarray]:
    """Inputs as the harness makes them: the op's make_inputs, else standard normal."""
    make = spec.inputs_fn()
    given = make(rng, **sizes) if make else {}
    out = {}
    for name, t in spec.inputs.items():
        dt = DTYPES[t.dtype]
        shape = spec.shape(name, sizes)
        if name in given:
            out[name] = np.ascontiguousarray(given[name], dtype=dt)
        elif dt.kind == "f":
            out[name] = rng.standard_normal(shape).astype(dt)
        else:
            out[name] = rng.integers(-8, 9, size=shape).astype(dt)
    return out


def reference_outputs(spec: OpSpec, sizes: dict[str, int], ins: dict[str, np.ndarray]
                      ) -> dict[str, np.ndarray]:
    kw: dict[str, Any] = {n: (a.astype(np.float64) if a.dtype.kind == "f" else a)
                          for n, a in ins.items()}
    kw.update({n: s.value for n, s in spec.scalars.items()})
    kw.update(sizes)
    return {n: np.asarray(v, dtype=np.float64) for n, v in spec.reference_fn()(**kw).items()}


def close_enough(got: np.ndarray, ref: np.ndarray, rtol: float, atol: float) -> bool:
    return bool(np.allclose(np.asarray(got, dtype=np.float64), ref, rtol=rtol, atol=atol))


def _child(mode: str, job: dict, timeout_s: float, env: dict[str, str] | None = None) -> dict:
    """Run `python -m kernelcrew.evals.peers MODE JOB.json`; its last stdout line is JSON."""
    with tempfile.TemporaryDirectory(prefix=f"kc-peer-{mode}-") as tmp:
        job_path = Path(tmp) / "job.json"
        job_path.write_text(json.dumps(job))
        full_env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p),
                    **(env or {})}
        try:
            run = subprocess.run([sys.executable, "-m", "kernelcrew.evals.peers", mode,
                                  str(job_path)], check=False, capture_output=True, text=True,
                                 timeout=timeout_s, env=full_env, cwd=tmp)
        except subprocess.TimeoutExpired:
            return {"error": f"the {mode} peer ran past {timeout_s:.0f} s"}
        lines = run.stdout.strip().splitlines()
        if run.returncode != 0 or not lines:
            tail = (run.stderr or run.stdout).strip().splitlines()[-3:]
            return {"error": f"the {mode} peer exited {run.returncode}: " + " / ".join(tail)}
        try:
            return json.loads(lines[-1])
        except json.JSONDecodeError:
            return {"error": f"the {mode} peer printed no JSON: {lines[-1][:200]}"}


def peer_env() -> dict[str, str]:
    """The thread settings the kernels run with (the CPU backend's worker env)."""

    n = str(cpu_threads())
    return {"OMP_NUM_THREADS": n, "OMP_PROC_BIND": "false", "OPENBLAS_NUM_THREADS": n,
            "MKL_NUM_THREADS": n}


# ---------------------------------------------------------------- the physical bound


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
    gbps: float  # bandwidth peak (GB/s)
    gflops: float | None  # FLOP/s peak (GFLOP/s), None when not measured (CUDA)
    source: str  # how it was measured


def machine_peaks(backend: str = "cpu") -> Peaks:
    """The other engineer's measured peaks (kernelcrew.tools.backends.peaks)."""
    if backend == "cuda":
        p = cuda_peaks(get_backend("cuda"))
        return Peaks(p.copy_gbps, None, p.method)

    p = cpu_peaks()
    return Peaks(p.triad_gbps, p.fma_gflops, f"kernelcrew.tools.backends.peaks: {p.method}")


def bound_for(spec: OpSpec, cases: list[dict[str, int]], peaks: Peaks,
              time_ms: float | None = None) -> Bound:
    """The roofline bound of a set of cases run back to back, and the shares a time reaches."""
    nbytes = sum(spec.cost_bytes(c) for c in cases)
    flops = sum(spec.cost_flops(c) for c in cases)
    mem_ms = nbytes / (peaks.gbps * 1e9) * 1e3
    cmp_ms = flops / (peaks.gflops * 1e9) * 1e3 if peaks.gflops else 0.0
    b = Bound(nbytes, flops, max(mem_ms, cmp_ms), "bandwidth" if mem_ms >= cmp_ms else "compute")
    if time_ms and time_ms > 0:
        b.achieved_gbps = nbytes / (time_ms * 1e-3) / 1e9
        b.achieved_gflops = flops / (time_ms * 1e-3) / 1e9
        b.bandwidth_share = b.achieved_gbps / peaks.gbps
        b.compute_share = b.achieved_gflops / peaks.gflops if peaks.gflops else None
        b.bound_share = b.bound_ms / time_ms
    return b


def typical_cases(spec: OpSpec) -> list[Case]:
    return [c for c in spec.cases() if c.group == "typical"] or list(spec.cases())


# ---------------------------------------------------------------- NumPy


def _softmax(x: np.ndarray, **_: Any) -> dict[str, np.ndarray]:
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return {"y": e / e.sum(axis=1, keepdims=True)}


def _gelu_muladd(x, r, s, t, **_: Any) -> dict[str, np.ndarray]:
    from scipy.special import erf  # NumPy has no erf; SciPy comes with Kernel Tuner

    v = x + r
    return {"y": np.float32(0.5) * v * (np.float32(1) + erf(v * np.float32(math.sqrt(0.5))))
            * s + t}


# op name -> [(label, expression)]: the idiomatic spelling(s) a NumPy user would write. Where
# there are two, both are timed and the faster one is the peer.
NUMPY_EXPRESSIONS: dict[str, list[tuple[str, Callable[..., dict[str, np.ndarray]]]]] = {
    "transpose": [("np.ascontiguousarray(x.T)", lambda x, **_: {"y": np.ascontiguousarray(x.T)})],
    "small_matmul": [("np.matmul(a, b)", lambda a, b, **_: {"c": np.matmul(a, b)})],
    "softmax_rows": [("e = np.exp(x - x.max(1, keepdims=True)); e / e.sum(1, keepdims=True)",
                      _softmax)],
    "rmsnorm": [("x / np.sqrt(np.mean(x * x, 1, keepdims=True) + eps) * w",
                 lambda x, w, eps, **_: {"y": x / np.sqrt(np.mean(x * x, axis=1, keepdims=True)
                                                          + eps) * w})],
    "scale_shift_sum": [
        ("(a * x + b).sum(1)", lambda x, a, b, **_: {"out": (a * x + b).sum(axis=1)}),
        ("a * x.sum(1) + b * cols", lambda x, a, b, cols, **_: {
            "out": a * x.sum(axis=1) + b * np.float32(cols)}),
    ],
    "add_gelu_muladd": [("0.5 * v * (1 + scipy.special.erf(v / sqrt(2))) * s + t, v = x + r",
                         _gelu_muladd)],
    "vadd": [("x + z", lambda x, z, **_: {"y": x + z})],
}


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
    out = _child("numpy", job, timeout_s, env)
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


def _numpy_child(job: dict) -> dict:
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


# ---------------------------------------------------------------- Kernel Tuner


def tunable_path(op: str) -> Path:
    p = TUNABLE_DIR / f"{op}.cpp"
    if not p.exists():
        raise InputError(f"no tunable kernel for {op}; add kernelcrew/evals/tunable/{op}.cpp "
                         "with knobs and a `// knob space: {...}` line")
    return p


def knob_space(kf: KernelFile) -> dict[str, list[int | float]]:
    """The values to search per knob, from the file's `// knob space: {KNOB: [...]}` line."""
    m = _SPACE.search(kf.text)
    if not m:
        raise InputError("declares no `// knob space: {KNOB: [values], ...}` line", path=kf.path)
    space = yaml.safe_load(m.group(1))
    if not isinstance(space, dict) or set(space) != set(kf.meta.knobs):
        raise InputError(f"the knob space names {sorted(space or {})} but the front matter's "
                         f"knobs are {sorted(kf.meta.knobs)}; name the same knobs", path=kf.path)
    for k, v in kf.meta.knobs.items():
        if v not in space[k]:
            raise InputError(f"knob {k}'s default {v} is not in its space {space[k]}",
                             path=kf.path)
    return {k: list(v) for k, v in space.items()}


def space_size(space: dict[str, list]) -> int:
    return math.prod(len(v) for v in space.values())


def timing_wrapper(spec: OpSpec, entry: str) -> tuple[str, str]:
    """(name, C source) of a function that calls the kernel once and returns the
    milliseconds it took: Kernel Tuner's C backend averages what the function returns."""
    params, names = [], []
    for name, kind in spec.signature():
        if kind == "input":
            params.append(f"const {_C_TYPES[spec.inputs[name].dtype]}* {name}")
        elif kind == "output":
            params.append(f"{_C_TYPES[spec.outputs[name].dtype]}* {name}")
        elif kind == "scalar":
            params.append(f"{_C_TYPES[spec.scalars[name].dtype]} {name}")
        else:
            params.append(f"int64_t {name}")
        names.append(name)
    fname = f"kt_time_{entry}"
    src = f"""
#include <time.h>
extern "C" float {fname}({", ".join(params)}) {{
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    {entry}({", ".join(names)});
    clock_gettime(CLOCK_MONOTONIC, &t1);
    return (float)((double)(t1.tv_sec - t0.tv_sec) * 1e3 +
                   (double)(t1.tv_nsec - t0.tv_nsec) * 1e-6);
}}
"""
    return fname, src


def tuning_case(spec: OpSpec) -> Case:
    """The case both tuners optimize: the largest typical case by the op's cost bytes."""
    return max(typical_cases(spec), key=lambda c: (spec.cost_bytes(c.sizes), -c.index))


@dataclass
class StrategyResult:
    strategy: str
    runs: int  # searches made (seeds)
    evals_to_target: list[int | None]  # per search; None: not within 5% in its budget
    evaluated: list[int]  # configurations evaluated per search
    median_evals: float | None  # over the searches that reached the target
    reached: int  # how many searches reached it
    mode: str  # "measured" or "replayed from the brute-force cache (simulation mode)"
    error: str = ""


@dataclass
class KernelTunerResult:
    op: str
    tunable: str
    case: str
    space: dict[str, list]
    size: int
    optimum: dict[str, Any] | None = None  # knob values of the brute-force optimum
    optimum_ms: float | None = None  # its time, Kernel Tuner's measurement
    default_ms: float | None = None  # the file's default knobs, Kernel Tuner's measurement
    strategies: list[StrategyResult] = field(default_factory=list)
    seconds: float = 0.0
    error: str = ""
    invalid: int = 0  # configurations that failed to compile, run or verify

    def best_strategy(self) -> StrategyResult | None:
        ok = [s for s in self.strategies if s.median_evals is not None and
              s.reached * 2 > s.runs]
        return min(ok, key=lambda s: s.median_evals, default=None)


def kernel_tuner_peer(op: str | Path, *, tunable: Path | None = None, max_fevals: int | None = None,
                      seeds: int = 5, iterations: int = 7, strategies: tuple[str, ...] = STRATEGIES,
                      timeout_s: float = PEER_TIMEOUT_S) -> KernelTunerResult:
    """Kernel Tuner on the tunable kernel's knob space, on the op's tuning case.

    brute_force is measured (every configuration, in Kernel Tuner's order); the other
    strategies are replayed `seeds` times over its cache in Kernel Tuner's simulation mode,
    so each sees exactly the landscape brute force measured.
    """
    spec = load_op(op)
    path = tunable or tunable_path(spec.name)
    kf = load_kernel(path)
    space = knob_space(kf)
    case = tuning_case(spec)
    res = KernelTunerResult(spec.name, str(path), case.label, space, space_size(space))
    job = {"op": str(spec.folder), "tunable": str(path), "case": case.sizes,
           "max_fevals": max_fevals or res.size, "seeds": seeds, "iterations": iterations,
           "strategies": list(strategies)}
    out = _child("kt", job, timeout_s, peer_env())
    if "error" in out and "strategies" not in out:
        res.error = out["error"]
        return res
    for k in ("optimum", "optimum_ms", "default_ms", "seconds", "invalid", "error"):
        setattr(res, k, out.get(k, getattr(res, k)))
    res.strategies = [StrategyResult(**s) for s in out.get("strategies", [])]
    return res


def strategy_options(strategy: str, size: int, max_fevals: int) -> dict[str, Any]:
    """Kernel Tuner's defaults, except where they cannot work on a space this small:
    bayes_opt samples 20 initial points (more than some spaces hold, an error) and the
    genetic algorithm shrinks its population to 2 (it then stops after 2-3 evaluations)."""
    opts: dict[str, Any] = {"max_fevals": max_fevals}
    if strategy == "bayes_opt":
        opts["popsize"] = max(2, min(20, size // 4))
    elif strategy == "genetic_algorithm":
        opts["popsize"] = max(4, min(26, size // 3))
    return opts


def evals_to_target(times: list[float | None], target_ms: float) -> int | None:
    """1-based count of evaluations until the best so far is within the target."""
    best = math.inf
    for i, t in enumerate(times, 1):
        if t is not None and t < best:
            best = t
        if best <= target_ms:
            return i
    return None


def _kt_child(job: dict) -> dict:
    import random

    import kernel_tuner

    spec = load_op(job["op"])
    kf = load_kernel(job["tunable"])
    space = knob_space(kf)
    sizes = job["case"]
    entry = kf.meta.entry or spec.name
    fname, wrapper = timing_wrapper(spec, entry)
    source = kf.body + "\n" + wrapper
    rng = np.random.default_rng(0)
    ins = make_inputs(spec, sizes, rng)
    ref = reference_outputs(spec, sizes, ins)
    args: list[Any] = []
    answer: list[Any] = []
    for name, kind in spec.signature():
        if kind == "input":
            args.append(ins[name])
            answer.append(None)
        elif kind == "output":
            t = spec.outputs[name]
            args.append(np.zeros(spec.shape(name, sizes), dtype=DTYPES[t.dtype]))
            answer.append(ref[name].astype(DTYPES[t.dtype]))
        elif kind == "scalar":
            s = spec.scalars[name]
            args.append(DTYPES[s.dtype].type(s.value))
            answer.append(None)
        else:
            args.append(np.int64(sizes[name]))
            answer.append(None)
    tol = spec.tolerance
    out_names = {i: n for i, (n, kind) in enumerate(spec.signature()) if kind == "output"}

    def verify(_answer: list, got: list, atol: float = 0.0) -> bool:
        # the op's own tolerance against the float64 reference, not Kernel Tuner's atol
        return all(close_enough(got[i], ref[n], tol.rtol, tol.atol)
                   for i, n in out_names.items())

    flags = [f for f in kf.meta.flags] + ["-std=c++17"]
    tmp = Path(tempfile.mkdtemp(prefix="kc-kt-"))
    cache = tmp / f"{spec.name}.json"
    common: dict[str, Any] = {
        "kernel_name": fname, "kernel_source": source, "problem_size": (1,), "arguments": args,
        "tune_params": space, "lang": "C", "compiler": "g++", "compiler_options": flags,
        "answer": answer, "verify": verify, "iterations": job["iterations"], "quiet": True,
        "cache": str(cache)}
    t0 = time.monotonic()
    result: dict[str, Any] = {"strategies": []}
    keys = list(space)

    def times_of(results: list[dict]) -> list[float | None]:
        seen: set[tuple] = set()
        out: list[float | None] = []
        for r in results:
            key = tuple(r[k] for k in keys)
            if key in seen:
                continue
            seen.add(key)
            t = r.get("time")
            out.append(float(t) if isinstance(t, (int, float)) and math.isfinite(t) else None)
        return out

    try:
        bf, _env = kernel_tuner.tune_kernel(**common, strategy="brute_force")
    except Exception as e:  # noqa: BLE001 - Kernel Tuner's own failure: reported, not hidden
        return {"error": f"brute force failed: {type(e).__name__}: {e}"}
    bf_times = times_of(bf)
    valid = [(t, r) for t, r in zip(bf_times, bf, strict=False) if t is not None]
    if not valid:
        return {"error": "brute force found no valid configuration"}
    opt_t, opt_r = min(valid, key=lambda tr: tr[0])
    target = opt_t * (1 + WITHIN)
    result.update(optimum={k: opt_r[k] for k in keys}, optimum_ms=opt_t,
                  invalid=len(bf_times) - len(valid))
    default = tuple(kf.meta.knobs[k] for k in keys)
    result["default_ms"] = next((t for t, r in zip(bf_times, bf, strict=False)
                                 if tuple(r[k] for k in keys) == default), None)
    size = space_size(space)
    n_bf = evals_to_target(bf_times, target)
    result["strategies"].append(asdict(StrategyResult(
        "brute_force", 1, [n_bf], [len(bf_times)], n_bf, int(n_bf is not None), "measured")))
    for strat in job["strategies"]:
        if strat == "brute_force":
            continue
        counts: list[int | None] = []
        evaluated: list[int] = []
        error = ""
        for seed in range(job["seeds"]):
            random.seed(seed)
            np.random.seed(seed)
            try:
                res, _env = kernel_tuner.tune_kernel(
                    **common, strategy=strat, simulation_mode=True,
                    strategy_options=strategy_options(strat, size, job["max_fevals"]))
            except Exception as e:  # noqa: BLE001 - e.g. a strategy's missing optional dependency
                error = f"{type(e).__name__}: {str(e).splitlines()[0][:200]}"
                break
            ts = times_of(res)
            counts.append(evals_to_target(ts, target))
            evaluated.append(len(ts))
        reached = [c for c in counts if c is not None]
        result["strategies"].append(asdict(StrategyResult(
            strat, len(counts), counts, evaluated,
            float(statistics.median(reached)) if reached else None, len(reached),
            "replayed from the brute-force cache (Kernel Tuner simulation mode)", error)))
    result["seconds"] = round(time.monotonic() - t0, 1)
    shutil.rmtree(tmp, ignore_errors=True)
    return result


# ---------------------------------------------------------------- the crew on a tunable op


def tunable_op_folder(op: str | Path, dest: Path, *, tunable: Path | None = None,
                      groups: tuple[str, ...] = ("boundary",)) -> Path:
    """A copy of the op folder whose CPU baseline is the tunable kernel at its default
    knobs, whose typical group is the tuning case alone, plus the given other groups
    (correctness is still checked on them)."""
    spec = load_op(op)
    path = tunable or tunable_path(spec.name)
    case = tuning_case(spec)
    folder = dest / spec.name
    shutil.copytree(spec.folder, folder)
    shutil.copyfile(path, folder / "baseline.cpp")
    data = yaml.safe_load((folder / "op.yaml").read_text())
    shapes = {"typical": {"weight": 1.0, "cases": [case.sizes]}}
    for g in groups:
        if g in data["shapes"]:
            shapes[g] = data["shapes"][g]
    data["shapes"] = shapes
    data["baselines"] = {"cpu": "baseline.cpp"}
    (folder / "op.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    load_op(folder)  # still a valid operator folder
    return folder


def main(argv: list[str]) -> int:
    if len(argv) != 2 or argv[0] not in ("kt", "numpy"):
        print("usage: python -m kernelcrew.evals.peers kt|numpy JOB.json", file=sys.stderr)
        return 2
    job = json.loads(Path(argv[1]).read_text())
    out = _kt_child(job) if argv[0] == "kt" else _numpy_child(job)
    print(json.dumps(out, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
