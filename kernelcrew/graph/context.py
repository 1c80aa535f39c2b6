"""Run settings: one typed object, reached by nodes through `Runtime[RunContext]`."""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from kernelcrew.trace import runs_root  # noqa: F401  (the runs' root lives with the run files)


@dataclass(kw_only=True)
class RunContext:
    backend: str = field(default="auto", metadata={"description": "cpu, cuda or auto"})
    agents: str = field(default="heuristic", metadata={
        "description": "policy for every agent (heuristic|llm), or per agent: "
                       "'coordinator=heuristic,specialists=llm'; the reflector and the critic "
                       "are LLMs only when named: 'specialists=llm,critic=llm,reflector=llm'"})
    specialists: list[str] | None = field(default=None, metadata={
        "description": "specialist names; default: every registered one"})
    max_iters: int = field(default=8, metadata={"description": "maximum iterations"})
    patience: int = field(default=3, metadata={
        "description": "stop after this many iterations without an accepted improvement"})
    wall_budget_s: float = field(default=1800.0, metadata={"description": "wall-clock budget"})
    token_budget: int | None = field(default=None, metadata={
        "description": "stop after the iteration in which the agents' LLM calls used this many "
                       "tokens in all (--token-budget)"})
    cost_budget: float | None = field(default=None, metadata={
        "description": "stop after the iteration in which the LLM calls cost this many dollars, "
                       "at the price settings (--cost-budget, --price-in/--price-out)"})
    candidates_per_iter: int = field(default=3, metadata={
        "description": "how many candidates the coordinator may send to evaluation at once"})
    min_speedup: float = field(default=0.10, metadata={
        "description": "a win must clear this relative threshold as well as the noise band"})
    cache: str = field(default_factory=lambda: os.environ.get("KERNELCREW_CACHE", ""), metadata={
        "description": "cache state of timed runs: cold | warm | auto; empty: each op's cache:"})
    reps: int = field(default_factory=lambda: int(os.environ.get("KERNELCREW_REPS", "20")),
                      metadata={"description": "timed runs per case and kernel"})
    timeout_s: float = field(default=30.0, metadata={"description": "seconds per worker"})
    roofline_done: float = field(default=0.95, metadata={
        "description": "stop once the best kernel runs above this share of its roofline "
                       "(bandwidth or compute peak); above 1: never"})
    max_compile_tries: int = field(default=3, metadata={
        "description": "compile attempts per candidate before its author must re-plan (and "
                       "as many again after the re-plan); that many failures in a row across "
                       "the crew make the next iteration plan first"})
    critic_profiles: bool | None = field(default=None, metadata={
        "description": "the critic profiles each raced candidate that was not accepted, to "
                       "compare its metrics with the best's (a few seconds each); None: when "
                       "an LLM is in the crew, whose next plan reads the comparison"})
    approve: bool = field(default=False, metadata={
        "description": "ask a human before a candidate is accepted (needs a checkpointer)"})
    runs_dir: str | None = field(default=None, metadata={"description": "where runs are kept"})
    run_dir: str | None = field(default=None, metadata={"description": "this run's folder"})
    memory_dir: str | None = field(default=None, metadata={"description": "local memory store"})
    memory_url: str | None = field(default=None, metadata={"description": "Chroma server URL"})
    memory_embedding: str = field(default="auto", metadata={
        "description": "embedding of the memory store: auto (the store's own; for a new store "
                       "minilm where its model package is installed, else hashed), hashed or "
                       "minilm"})
    use_memory: bool = field(default=True, metadata={"description": "read/write reflections"})
    seed: int | None = field(default=None, metadata={"description": "input seed"})
    executor: str = field(default="local", metadata={
        "description": "where evaluations run: local (here, one after another) or ray"})
    ray_address: str | None = field(default=None, metadata={
        "description": "Ray cluster address (default: env KERNELCREW_RAY_ADDRESS; none: a "
                       "local Ray started for the run)"})
    llm: dict[str, Any] = field(default_factory=dict, metadata={
        "description": "LLM settings (model, base_url, api_key, temperature, timeout, ...)"})

    @classmethod
    def from_any(cls, ctx: RunContext | dict | None) -> RunContext:
        if isinstance(ctx, RunContext):
            return ctx
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in (ctx or {}).items() if k in names})

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d.get("llm", {}).pop("api_key", None)  # never write secrets to disk
        return d

    def policy_for(self, role: str) -> str:
        """Policy of one role: 'specialists', 'coordinator', 'reflector' or a specialist name."""
        if role in ("reflector", "critic"):  # one call per candidate: only when named
            parts = dict(p.split("=", 1) for p in self.agents.split(",") if "=" in p)
            return parts.get(role, "heuristic")
        if "=" not in self.agents:
            return self.agents
        parts = dict(p.split("=", 1) for p in self.agents.split(",") if "=" in p)
        if role in parts:
            return parts[role]
        if role not in ("coordinator", "reflector", "critic") and "specialists" in parts:
            return parts["specialists"]
        return parts.get("default", "heuristic")
