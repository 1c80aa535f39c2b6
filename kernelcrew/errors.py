"""Exceptions shared by every layer.

`InputError` is bad input from the user (an op folder, a kernel file, a flag):
the CLI prints its one-line message and exits 2. Everything a *kernel* does wrong
is a verdict in a result object, never an exception.
"""

from __future__ import annotations

from pathlib import Path


class KernelcrewError(Exception):
    """Base class for kernelcrew's own errors."""


class InputError(KernelcrewError):
    """Bad input: names the file, the field and the fix in one line."""

    def __init__(self, message: str, *, path: str | Path | None = None, field: str | None = None):
        self.path = str(path) if path is not None else None
        self.field = field
        where = ""
        if self.path:
            where = f"{self.path}: "
        if field:
            where += f"{field}: "
        super().__init__(f"{where}{message}")


class ExprError(InputError):
    """An expression in op.yaml or a kernel file that the safe evaluator refuses."""


class PolicyViolation(InputError):
    """A kernel asks for something the harness refuses (a flag, an include, host code).

    When checking or evaluating a kernel this is a verdict (`rejected`), not a crash.
    """


class AgentUnavailable(KernelcrewError):
    """An agent cannot work any more (e.g. its LLM endpoint is down after retries).

    The graph turns this into a clean stop: the best kernel so far is kept and the run
    finishes with this as its stop reason.
    """


class ExecutorError(KernelcrewError):
    """The evaluation executor cannot go on (a cluster that went away): the run stops,
    its best kernel is on disk, and `--resume` continues once the cluster is back."""
