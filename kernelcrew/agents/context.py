"""What a specialist sees: a focused, bounded view of the run, built by the graph."""

from __future__ import annotations

from pydantic import BaseModel, Field

from kernelcrew.results import ProfileResult


class IterationNote(BaseModel):
    """One past evaluation, as the agents see it."""

    iteration: int
    author: str
    kind: str
    outcome: str  # accepted | slower | same | rejected | compile-error
    speedup: float | None = None
    detail: str = ""  # one line: why


class Feedback(BaseModel):
    """What comes back to the author of a failed candidate."""

    kind: str  # compile-error | incorrect | slower
    message: str  # normalized errors, failing cases, or the regression table
    attempt: int = 1


class AgentContext(BaseModel):
    op: str
    family: str
    description: str
    backend: str
    signature: str  # the entry's C signature / kernel args, for rewrites
    tolerance: str
    kernel: str  # the current best kernel file text
    kernel_is_baseline: bool = True
    profile: ProfileResult | None = None
    recent: list[IterationNote] = Field(default_factory=list)  # last 3-5 iterations
    tried: list[str] = Field(default_factory=list)  # folded older attempts: "kind by author: outcome"
    reflections: list[str] = Field(default_factory=list)  # relevant memory, one line each
    change_stats: dict[str, dict] = Field(default_factory=dict)  # kind -> tried/accepted/mean
    entry_params: list[dict[str, str]] = Field(default_factory=list)  # CPU: what the harness
    # passes the entry, in order (name, kind, dtype; kernelcrew.kernels.signature)
    extents: dict[str, str] = Field(default_factory=dict)  # array (op.yaml name) -> its
    # element count, an expression in the op's sizes (the shape in op.yaml): what a move
    # that needs an array's length may rely on (private_bins)
    compile_report: str = ""  # the compiler's report on the best kernel: vectorization (CPU),
    # ptxas resources (CUDA); the compiler_flags specialist reads it
    feedback: Feedback | None = None
    iteration: int = 0
    run_dir: str | None = None  # where an agent may record what it did (e.g. its LLM calls)
