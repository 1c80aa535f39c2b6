"""The answers the LLM agents ask for, as pydantic models (sent as JSON schemas; a
plain-text answer is read into the same fields by `answers.read_text_answer`)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field


class PlanAnswer(BaseModel):
    """The plan for one change to the kernel, before any code is written."""

    bottleneck: str = Field(description="what limits the current best kernel, at most three "
                                        "sentences, citing the numbers")
    plan: str = Field(description="the concrete steps of the change, numbered and short")
    kind: str = Field(description="short tag of the change: the move's name when the change "
                                  "is a move of the catalogue, else e.g. tiling, fusion, rewrite")
    change_type: str = Field(default="source", description='"source", "flags" or "knobs"')
    expected_gain: float = Field(default=1.0, description="expected speedup factor over the "
                                                          "current best, 1.0 = none")
    risks: str = Field(default="", description="what could make it wrong or slower")
    confidence: float = Field(default=0.5, description="0 to 1")


class MoveCall(BaseModel):
    move: str = Field(description="the name of a move of the catalogue")
    params: dict[str, Any] = Field(default_factory=dict,
                                   description="its parameters; leave out for the defaults")


class Edit(BaseModel):
    search: str = Field(description="lines of the current best kernel, copied exactly")
    replace: str = Field(description="the lines that replace them")


class CodeAnswer(BaseModel):
    """The change: moves of the catalogue, search/replace edits, or the whole kernel file."""

    moves: list[MoveCall] = Field(default_factory=list, description=(
        "moves of the catalogue, applied in order to the current best (legality checked)"))
    edits: list[Edit] = Field(default_factory=list, description=(
        "search/replace edits of the current best, applied after the moves"))
    kernel: str = Field(default="", description=(
        "the complete kernel file, when the change is neither moves nor edits (front matter "
        "the answer leaves out is filled in from the current best)"))
    expected_gain: float = Field(default=1.0, description="expected speedup factor over the "
                                                          "current best")
    risks: str = Field(default="", description="what could make it wrong or slower")
    confidence: float = Field(default=0.5, description="0 to 1")

    def form(self) -> str:
        """moves | edits | kernel | moves+edits: what the answer changes the kernel with."""
        parts = [p for p, v in (("moves", self.moves), ("edits", self.edits)) if v]
        return "+".join(parts) if parts else "kernel"


class ProposeAnswer(CodeAnswer):
    """The plan and the change in one answer (the one-call setting)."""

    bottleneck: str = Field(default="", description="what limits the current best kernel, at "
                                                    "most three sentences")
    plan: str = Field(default="", description="the steps of the change, short")
    kind: str = Field(default="", description="short tag of the change")


class KernelAnswer(BaseModel):
    """A complete kernel file (the writer's first kernel of an operator)."""

    kernel: str = Field(description="the complete kernel file, starting with the `/* kernelcrew` "
                                    "front matter, nothing omitted")
    expected_gain: float = Field(default=1.0, description="expected speedup factor")
    risks: str = Field(default="", description="what could make it wrong or slower")
    confidence: float = Field(default=0.5, description="0 to 1")


class ExplainAnswer(BaseModel):
    """Where a wrong result comes from, before any code is changed."""

    cause: str = Field(description="the source of the error in the kernel, citing the failing "
                                   "cases and values")
    fix: str = Field(description="what will be changed to remove it")
