"""Evaluation executors: where the compiles, correctness checks and races run.

`local` (the default) runs them in this process, one after another, and never imports
Ray; `ray` spreads them over a Ray cluster (the optional extra `kernelcrew[ray]`). The
graph's nodes call `Executor.evaluate` with a batch of `Evaluation`s and get typed
`EvalResult`s; agents never see an executor.
"""

from __future__ import annotations

from pathlib import Path

from kernelcrew.errors import ExecutorError, InputError
from kernelcrew.tools.executor.base import (
    EXECUTORS,
    RAY_EXTRA,
    Attempt,
    EvalResult,
    Evaluation,
    Executor,
    NodeUnfit,
    RaceOutcome,
    RunSetup,
    VerifyOutcome,
    missing_ray_message,
    op_files,
)
from kernelcrew.tools.executor.local import LocalExecutor
from kernelcrew.tools.executor.workbench import Workbench, workbench_for

__all__ = ["EXECUTORS", "RAY_EXTRA", "Attempt", "EvalResult", "Evaluation", "Executor",
           "ExecutorError", "LocalExecutor", "NodeUnfit", "RaceOutcome", "RunSetup",
           "VerifyOutcome", "Workbench", "make_executor", "require", "workbench_for"]


def require(kind: str) -> None:
    """Fail early, in one line, when the executor cannot be had here."""
    if kind not in EXECUTORS:
        raise InputError(f"unknown executor {kind!r}; choose one of {', '.join(EXECUTORS)}",
                         field="--executor")
    if kind == "ray":
        try:
            import ray  # noqa: F401 - the optional extra; nothing else imports it
        except ImportError:
            raise InputError(missing_ray_message()) from None


def make_executor(kind: str, bench: Workbench, *, seed: int,
                  ray_address: str | None = None) -> Executor:
    """The executor of one run; `bench` is the run's own workbench (the local one)."""
    require(kind)
    if kind == "local":
        return LocalExecutor(bench)
    try:
        from kernelcrew.tools.executor import ray_cluster  # the optional extra
    except ImportError as e:
        raise InputError(f"{missing_ray_message()} ({e})") from None
    h = bench.harness
    folder = Path(bench.spec.folder) if bench.spec.folder else None
    if folder is None:
        raise InputError("a Ray run needs the operator's folder, to ship it to the nodes")
    setup = RunSetup(op_name=bench.spec.name, op_files=op_files(folder),
                     backend=bench.backend.name, seed=seed,
                     bench={k: getattr(h.bench, k) for k in h.bench.__dataclass_fields__},
                     limits={k: getattr(h.limits, k) for k in h.limits.__dataclass_fields__})
    return ray_cluster.RayExecutor(setup, address=ray_address)
