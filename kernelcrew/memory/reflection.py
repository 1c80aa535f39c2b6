"""The unit of shared memory: one reflection written at the end of an iteration."""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, computed_field, model_validator

Bottleneck = Literal["memory-bound", "compute-bound", "latency-bound", "launch-bound", "unknown"]

# Bumped when the metadata layout written to the store changes (2: `outcome` added; records
# of schema 1 read back with outcome "" and count only by `accepted`. 3: `candidate` added;
# older records read back with candidate "" and keep their ids).
METADATA_SCHEMA = 3

# What an evaluation's outcome says about the change, for track records. "faster-not-best"
# beat the incumbent but lost to a better candidate of the same iteration: it helped.
HELPED_OUTCOMES = frozenset({"accepted", "faster-not-best"})
FAILED_OUTCOMES = frozenset({"slower", "rejected", "compile-error"})


def _now() -> datetime:
    return datetime.now(UTC)


class Reflection(BaseModel):
    """What was tried, on what evidence, what happened and why, plus where it applies."""

    model_config = ConfigDict(frozen=True, extra="forbid", str_strip_whitespace=True)

    text: str = Field(min_length=1, description="The reflection itself, in prose.")
    operator: str = Field(min_length=1, description="Operator name, e.g. 'softmax'.")
    family: str = Field(min_length=1, description="Operator family, e.g. 'reduction'.")
    backend: str = Field(min_length=1, description="Backend, e.g. 'cpu' or 'cuda'.")
    device: str = Field(default="", description="Device the run measured on, e.g. 'H200'.")
    node: str = Field(default="", description="Where the evaluation ran: the host, and the "
                      "cluster node id when an executor spread the run over a cluster.")
    bottleneck: Bottleneck = Field(default="unknown", description="Diagnosed bottleneck.")
    change_kind: str = Field(
        min_length=1, description="Kind of change: 'simd', 'omp_parallel', 'knob:BLOCK', ..."
    )
    author: str = Field(min_length=1, description="Name of the agent that wrote it.")
    accepted: bool = Field(description="Whether the verifier accepted the change.")
    outcome: str = Field(
        default="",
        description="The evaluation's outcome: accepted, faster-not-best, same, slower, "
        "rejected (incorrect), compile-error, declined; '' when not recorded.",
    )
    speedup: float = Field(
        ge=0.0, allow_inf_nan=False, description="Speedup over the baseline; 0 if it failed."
    )
    run_id: str = Field(min_length=1, description="Run that produced it.")
    iteration: int = Field(ge=0, description="Loop iteration within the run.")
    candidate: str = Field(
        default="", description="The candidate file it is about, within the run "
        "(one author can write several candidates of one kind in one iteration).")
    created: datetime = Field(default_factory=_now, description="When it was written (UTC).")

    @model_validator(mode="before")
    @classmethod
    def _drop_derived_id(cls, data: Any) -> Any:
        # `id` is derived, but model_dump() includes it: accept it back without a check.
        if isinstance(data, dict) and "id" in data:
            data = {k: v for k, v in data.items() if k != "id"}
        return data

    @computed_field  # type: ignore[prop-decorator]
    @property
    def id(self) -> str:
        """Deterministic id, so writing the same reflection twice is an upsert. Two
        candidates of one author and kind in one iteration are two reflections: the
        candidate is part of the key (records written before it was keep their ids)."""
        parts = [self.run_id, str(self.iteration), self.author, self.change_kind]
        key = "\x1f".join(parts + ([self.candidate] if self.candidate else []))
        return "r-" + hashlib.blake2b(key.encode(), digest_size=12).hexdigest()

    @property
    def verdict(self) -> str:
        """The outcome, or accepted / not accepted for records that predate outcomes."""
        return self.outcome or ("accepted" if self.accepted else "not accepted")

    def to_metadata(self) -> dict[str, str | int | float | bool]:
        """Flat metadata for the vector store (Chroma accepts only scalars)."""
        return {
            "schema": METADATA_SCHEMA,
            "operator": self.operator,
            "family": self.family,
            "backend": self.backend,
            "device": self.device,
            "node": self.node,
            "bottleneck": self.bottleneck,
            "change_kind": self.change_kind,
            "author": self.author,
            "accepted": self.accepted,
            "outcome": self.outcome,
            "speedup": float(self.speedup),
            "run_id": self.run_id,
            "iteration": self.iteration,
            "candidate": self.candidate,
            "created": self.created.isoformat(),
        }

    @classmethod
    def from_metadata(cls, text: str, metadata: dict[str, Any]) -> Reflection:
        """Inverse of `to_metadata`, given the reflection text."""
        fields = {k: v for k, v in metadata.items() if k in cls.model_fields}
        return cls(text=text, **fields)
