"""What every peer shares: inputs as the harness makes them, the float64 reference, the
tolerance check, typical cases, and the child process each peer is timed in
(`python -m kernelcrew.evals.peers MODE JOB.json`), so nothing it loads stays in the caller
and its timing is not disturbed by the caller's own work."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from kernelcrew.kernels.spec import DTYPES, Case, OpSpec
from kernelcrew.tools.backends.cpu import cpu_threads


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
    """The harness's rule: within the tolerance, NaN where (and only where) the reference
    has NaN (elements a function leaves unwritten)."""
    return bool(np.allclose(np.asarray(got, dtype=np.float64), ref, rtol=rtol, atol=atol,
                            equal_nan=True))


def run_child(mode: str, job: dict, timeout_s: float, env: dict[str, str] | None = None) -> dict:
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


def typical_cases(spec: OpSpec) -> list[Case]:
    return [c for c in spec.cases() if c.group == "typical"] or list(spec.cases())

