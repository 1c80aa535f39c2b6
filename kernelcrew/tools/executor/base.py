"""What an evaluation executor takes and gives back.

The graph's nodes hand an executor a batch of `Evaluation`s (compile a candidate, verify
it on every shape group, or race it against the kernel it must beat) and get one typed
`EvalResult` per evaluation. Where the work ran is part of the result (`node`, `host`),
and so are the attempts that the infrastructure lost on the way (`attempts`): a result
whose every attempt was lost carries `infra_error` and no verdict.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from pathlib import Path
from typing import Literal, Protocol

from pydantic import BaseModel, Field

from kernelcrew.errors import InputError, KernelcrewError
from kernelcrew.results import CaseRow, CompileResult

Stage = Literal["compile", "verify", "race"]
EXECUTORS = ("local", "ray")
RAY_EXTRA = "kernelcrew[ray]"
OP_FILES_MAX_BYTES = 8 * 2**20  # an operator folder shipped to remote nodes


class Evaluation(BaseModel):
    """One piece of work on one candidate."""

    key: str  # unique in its batch (the graph's cache key)
    stage: Stage
    kernel: str  # the kernel file's text
    path: str  # where the kernel file lives (for names in messages)
    incumbent: str | None = None  # race: the text of the kernel it is timed against
    incumbent_path: str | None = None
    against: str = "the current best"


class Attempt(BaseModel):
    """An attempt the infrastructure lost (a node or worker died, a task was lost)."""

    node: str
    host: str = ""
    error: str


class VerifyOutcome(BaseModel):
    correct: bool
    failure: str = ""
    rows: list[CaseRow] = Field(default_factory=list)
    sandbox: str = ""


class RaceOutcome(BaseModel):
    """The gate's decision on a challenger timed side by side with an incumbent."""

    verdict: str
    speedup: float | None = None  # incumbent / challenger, weighted over the groups
    band: float | None = None
    measured_noise: float | None = None  # the gate's measured noise alone (None: too few rounds)
    min_speedup: float = 0.0  # the settable floor of the band
    rounds: int = 0  # rounds the noise was measured over
    reason: str = ""
    groups: dict[str, float] = Field(default_factory=dict)
    rows: list[CaseRow] = Field(default_factory=list)
    failure: str = ""  # the challenger failed its timed-output checks


class EvalResult(BaseModel):
    key: str
    stage: Stage
    executor: str = "local"
    node: str = ""  # the node that produced the result ("" for an infrastructure error)
    host: str = ""
    attempts: list[Attempt] = Field(default_factory=list)  # lost attempts before this one
    infra_error: str = ""  # every attempt was lost: no verdict on the kernel
    started: float = 0.0  # wall clock (time.time) on the node when the work began
    finished: float = 0.0  # ... and ended: the span of compiling, running and timing
    compile: CompileResult | None = None
    verify: VerifyOutcome | None = None
    race: RaceOutcome | None = None

    def ran_on(self) -> dict[str, str]:
        """Where the result came from, for the trace and the reflection."""
        return {"executor": self.executor, "node": self.node, "host": self.host}

    def retries(self) -> list[dict[str, str]]:
        return [a.model_dump() for a in self.attempts]

    def trace_fields(self) -> dict:
        """What a trace event records about where and when the work ran."""
        out: dict = {"ran_on": self.ran_on()}
        if self.finished:
            out["task"] = [round(self.started, 3), round(self.finished, 3)]
        if self.attempts:
            out["retries"] = self.retries()
        return out


OnResult = Callable[[EvalResult], None]


class Executor(Protocol):
    """Runs batches of evaluations; results come back in the batch's order, and each is
    also handed to `on_result` as soon as it is known (so a caller can keep it before
    the rest of the batch is done)."""

    name: str

    def evaluate(self, batch: list[Evaluation], on_result: OnResult | None = None
                 ) -> list[EvalResult]: ...

    def candidate_slots(self, requested: int) -> int:
        """How many candidates an iteration may send (at least `requested`)."""
        ...

    def close(self) -> None: ...


class NodeUnfit(KernelcrewError):
    """Raised on a node that cannot do the work (its compiler is missing, a kernel that
    compiled elsewhere does not compile there): an infrastructure fault, retried on
    another node, never a verdict."""


class RunSetup(BaseModel):
    """Everything a node needs to rebuild the run's harness: the operator folder's files,
    the backend, the input seed and the timing settings (the inputs and the float64
    references are made from the seed, so every node makes the same)."""

    op_name: str
    op_files: dict[str, bytes]  # relative path -> content
    backend: str
    seed: int
    bench: dict
    limits: dict

    def digest(self) -> str:
        h = hashlib.blake2b(digest_size=12)
        for k in sorted(self.op_files):
            h.update(k.encode() + b"\0" + self.op_files[k] + b"\0")
        h.update(repr((self.backend, self.seed, sorted(self.bench.items()),
                       sorted(self.limits.items()))).encode())
        return h.hexdigest()


def op_files(folder: Path) -> dict[str, bytes]:
    """The files of an operator folder (caches left out), to ship to other nodes."""
    out: dict[str, bytes] = {}
    total = 0
    for p in sorted(folder.rglob("*")):
        if not p.is_file() or "__pycache__" in p.parts or p.suffix == ".pyc":
            continue
        data = p.read_bytes()
        total += len(data)
        if total > OP_FILES_MAX_BYTES:
            raise InputError(f"the operator folder is over {OP_FILES_MAX_BYTES >> 20} MiB; "
                             "a cluster run ships it to every node: keep large data out of it",
                             path=folder)
        out[str(p.relative_to(folder))] = data
    return out


def missing_ray_message() -> str:
    return (f"--executor ray needs Ray, which is not installed: pip install '{RAY_EXTRA}' "
            "(or pip install ray)")
