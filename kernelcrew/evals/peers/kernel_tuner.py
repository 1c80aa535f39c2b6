"""Kernel Tuner (its C backend) searching the knob space a tunable kernel file declares: how
many evaluations each strategy needs to come within 5% of the brute-force optimum; and the
copy of an op folder the crew runs on for the same comparison."""

from __future__ import annotations

import math
import re
import shutil
import statistics
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from kernelcrew.errors import InputError
from kernelcrew.evals.peers.common import (
    close_enough,
    make_inputs,
    peer_env,
    reference_outputs,
    run_child,
    typical_cases,
)
from kernelcrew.kernels.kernelfile import KernelFile, load_kernel
from kernelcrew.kernels.spec import DTYPES, Case, OpSpec, load_op

TUNABLE_DIR = Path(__file__).resolve().parent / "tunable"
STRATEGIES = ("brute_force", "random_sample", "genetic_algorithm", "bayes_opt")
WITHIN = 0.05  # "within 5% of the brute-force optimum"
PEER_TIMEOUT_S = 900.0  # one child process (all of one op's Kernel Tuner searches)
_SPACE = re.compile(r"^\s*//\s*knob space:\s*(\{.*\})\s*$", re.MULTILINE)
_C_TYPES = {"float32": "float", "float64": "double", "float16": "uint16_t", "int32": "int32_t",
            "int64": "int64_t", "uint8": "uint8_t", "int8": "int8_t", "uint16": "uint16_t",
            "int16": "int16_t", "uint32": "uint32_t"}


def tunable_path(op: str) -> Path:
    p = TUNABLE_DIR / f"{op}.cpp"
    if not p.exists():
        raise InputError(f"no tunable kernel for {op}; add kernelcrew/evals/peers/tunable/{op}.cpp "
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
    out = run_child("kt", job, timeout_s, peer_env())
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


def _kt_arguments(spec: OpSpec, sizes: dict[str, int]
                  ) -> tuple[list[Any], list[Any], dict[str, np.ndarray]]:
    """Kernel Tuner's arguments in the entry's order, its `answer` list (the outputs'
    float64 references cast to their dtype), and the references."""
    ins = make_inputs(spec, sizes, np.random.default_rng(0))
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
            sc = spec.scalars[name]
            args.append(DTYPES[sc.dtype].type(sc.value))
            answer.append(None)
        else:
            args.append(np.int64(sizes[name]))
            answer.append(None)
    return args, answer, ref


def _times_of(results: list[dict], keys: list[str]) -> list[float | None]:
    """Each configuration's time, first evaluation only, None where it failed."""
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


def _kt_setup(job: dict, tmp: Path) -> tuple[KernelFile, dict[str, Any]]:
    """The tunable kernel file, and the keyword arguments every `tune_kernel` call shares
    (the op's own tolerance against the float64 reference decides, not Kernel Tuner's)."""
    spec = load_op(job["op"])
    kf = load_kernel(job["tunable"])
    sizes = job["case"]
    fname, wrapper = timing_wrapper(spec, kf.meta.entry or spec.name)
    args, answer, ref = _kt_arguments(spec, sizes)
    tol = spec.tolerance
    out_names = {i: n for i, (n, kind) in enumerate(spec.signature()) if kind == "output"}

    def verify(_answer: list, got: list, atol: float = 0.0) -> bool:
        return all(close_enough(got[i], ref[n], tol.rtol, tol.atol)
                   for i, n in out_names.items())

    return kf, {
        "kernel_name": fname, "kernel_source": kf.body + "\n" + wrapper, "problem_size": (1,),
        "arguments": args, "tune_params": knob_space(kf), "lang": "C", "compiler": "g++",
        "compiler_options": [*kf.meta.flags, "-std=c++17"], "answer": answer,
        "verify": verify, "iterations": job["iterations"], "quiet": True,
        "cache": str(tmp / f"{spec.name}.json")}


def _kt_strategy(kernel_tuner: Any, common: dict[str, Any], strat: str, job: dict,
                 keys: list[str], target: float) -> StrategyResult:
    """One strategy over `job["seeds"]` seeds, replayed from the brute-force cache."""
    import random

    counts: list[int | None] = []
    evaluated: list[int] = []
    error = ""
    size = space_size(common["tune_params"])
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
        ts = _times_of(res, keys)
        counts.append(evals_to_target(ts, target))
        evaluated.append(len(ts))
    reached = [c for c in counts if c is not None]
    return StrategyResult(strat, len(counts), counts, evaluated,
                          float(statistics.median(reached)) if reached else None, len(reached),
                          "replayed from the brute-force cache (Kernel Tuner simulation mode)",
                          error)


def kt_child(job: dict) -> dict:
    """In a child process: Kernel Tuner's brute force over the knob space (measured), then
    each other strategy replayed from its cache; evaluations until within WITHIN of the
    optimum."""
    import kernel_tuner

    tmp = Path(tempfile.mkdtemp(prefix="kc-kt-"))
    kf, common = _kt_setup(job, tmp)
    keys = list(common["tune_params"])
    t0 = time.monotonic()
    try:
        bf, _env = kernel_tuner.tune_kernel(**common, strategy="brute_force")
    except Exception as e:  # noqa: BLE001 - Kernel Tuner's own failure: reported, not hidden
        return {"error": f"brute force failed: {type(e).__name__}: {e}"}
    bf_times = _times_of(bf, keys)
    valid = [(t, r) for t, r in zip(bf_times, bf, strict=False) if t is not None]
    if not valid:
        return {"error": "brute force found no valid configuration"}
    opt_t, opt_r = min(valid, key=lambda tr: tr[0])
    target = opt_t * (1 + WITHIN)
    default = tuple(kf.meta.knobs[k] for k in keys)
    n_bf = evals_to_target(bf_times, target)
    result: dict[str, Any] = {
        "strategies": [asdict(StrategyResult("brute_force", 1, [n_bf], [len(bf_times)], n_bf,
                                             int(n_bf is not None), "measured"))],
        "optimum": {k: opt_r[k] for k in keys}, "optimum_ms": opt_t,
        "invalid": len(bf_times) - len(valid),
        "default_ms": next((t for t, r in zip(bf_times, bf, strict=False)
                            if tuple(r[k] for k in keys) == default), None)}
    for strat in job["strategies"]:
        if strat != "brute_force":
            result["strategies"].append(asdict(_kt_strategy(kernel_tuner, common, strat, job,
                                                             keys, target)))
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

