"""What specialists propose and what the coordinator decides: typed, never free text."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field, field_validator

ChangeType = Literal["source", "flags", "knobs"]


class Change(BaseModel):
    """The concrete change. `kernel` is always the complete candidate kernel file (front
    matter included); `flags`/`knobs` say what differs, for merging and conflicts."""

    type: ChangeType
    kind: str = Field(description="short tag for memory and conflicts, e.g. omp_parallel, simd, "
                                  "fusion, interchange, restrict, unroll, flags, knob:BLOCK, rewrite")
    kernel: str = Field(description="the complete kernel file text after the change")
    flags: list[str] | None = None  # the new flag list, when flags changed
    knobs: dict[str, int | float] | None = None  # the knobs set, when knobs changed
    regions: list[str] = Field(default_factory=list,
                               description="code regions rewritten (e.g. 'loop@12'), for conflicts")
    transform: str | None = Field(
        default=None, description="name of the transformation that made `kernel` "
                                  "(kernelcrew.agents.transforms.TRANSFORMS), so it can be "
                                  "re-applied to another base with apply_change(); None for a "
                                  "free-form rewrite")
    params: dict[str, Any] = Field(default_factory=dict,
                                   description="the transformation's parameters")


class Proposal(BaseModel):
    author: str
    bottleneck: str = Field(description="the bottleneck in at most three sentences")
    plan: str
    change: Change
    expected_gain: float = Field(ge=0, description="expected speedup factor, e.g. 1.3")
    risks: str
    confidence: float = Field(ge=0, le=1)
    # where expected_gain and confidence come from: "evidence" (rules over the profile's
    # numbers and the source) or "model" (an LLM's own claim: shown, never ranked on)
    estimate: Literal["evidence", "model"] = "evidence"

    @field_validator("bottleneck")
    @classmethod
    def _three_sentences(cls, v: str) -> str:
        sentences = [s for s in v.replace("!", ".").replace("?", ".").split(". ") if s.strip()]
        if len(sentences) > 3:
            v = ". ".join(sentences[:3]).rstrip(".") + "."
        return v.strip()


class Decision(BaseModel):
    """The coordinator's choice for one iteration, and why."""

    candidates: list[Proposal]  # what goes to evaluation (1-3), merged where compatible
    merged_from: list[list[str]] = Field(default_factory=list)  # authors behind each candidate
    rejected: list[str] = Field(default_factory=list)  # "author/kind: why not"
    reason: str
