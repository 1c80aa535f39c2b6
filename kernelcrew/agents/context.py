"""What a specialist sees: a focused, bounded view of the run, built by the graph."""

from __future__ import annotations

from pydantic import BaseModel, Field

from kernelcrew.agents.contract import OperatorContract
from kernelcrew.results import ProfileResult


class IterationNote(BaseModel):
    """One past evaluation, as the agents see it."""

    iteration: int
    author: str
    kind: str
    outcome: str  # accepted | slower | same | rejected | compile-error
    speedup: float | None = None
    detail: str = ""  # one line: what happened, from structured fields (never the judge's
    # own words: see graph.feedback)


class Feedback(BaseModel):
    """What comes back to the author of a failed candidate."""

    kind: str  # compile-error | incorrect | slower | crew-compile-errors
    message: str  # normalized errors, failing cases, or the critic's comparison
    attempt: int = 1
    replan: bool = False  # revise the plan first (repeated compile errors)


class MoveOption(BaseModel):
    """A move of the catalogue as offered to an author."""

    name: str
    doc: str
    params: dict[str, object] = Field(default_factory=dict)  # parameter -> default
    applies: bool = True
    why_not: str = ""  # why it does not apply to the current best
    suggested: bool = False  # the rule-based specialist of the field proposes it
    tried: str = ""  # the outcome when its result on this kernel was evaluated already

    def line(self) -> str:
        ps = ", ".join(f"{k}={v!r}" if isinstance(v, str) else f"{k}={v}"
                       for k, v in self.params.items())
        head = f"{self.name}({ps})" if ps else self.name
        if not self.applies:
            return f"{self.name}: {self.why_not}"
        marks = [m for m, on in (("the rule-based specialist proposes it", self.suggested),
                                 (f"tried on this kernel: {self.tried}", self.tried)) if on]
        return f"{head}: {self.doc}" + "".join(f" [{m}]" for m in marks)


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
    contract: OperatorContract | None = None  # arrays, shape groups as ranges, tolerance
    moves: list[MoveOption] = Field(default_factory=list)  # the catalogue against the best
    static_evidence: list[str] = Field(default_factory=list)  # what the source shows (the
    # heuristic crew's static analysis: strided accesses, reduction chains, jammable nests)
    suggestions: list[str] = Field(default_factory=list)  # the rule-based specialist of the
    # same field: the moves it would make, with its plan
    critiques: list[str] = Field(default_factory=list)  # the critic on the last race
    feedback: Feedback | None = None
    iteration: int = 0
    run_dir: str | None = None  # where an agent may record what it did (e.g. its LLM calls)
