"""The `llm` policy: specialists (and a coordinator) backed by any OpenAI-compatible endpoint
through langchain-openai's `ChatOpenAI`.

    from kernelcrew.agents.llm import LLMSpecialist, LLMUnavailable, preflight

`LLMUnavailable` (a `kernelcrew.errors.AgentUnavailable`) is the only exception the agents
raise on purpose: the endpoint is unreachable, hangs, fails after the retries, or refuses
every structured-output method. The graph turns it into a clean stop with the best kernel.
"""

from __future__ import annotations

from typing import Any

from kernelcrew.agents.llm.client import (
    LLMClient,
    LLMUnavailable,
    PromptTooLarge,
    build_chat_model,
    check_reachable,
)
from kernelcrew.agents.llm.coordinator import LLMCoordinator
from kernelcrew.agents.llm.endpoint import Endpoint, endpoint_for, probe
from kernelcrew.agents.llm.focus import FocusedContext, build_context, count_tokens
from kernelcrew.agents.llm.replay import Recording, ReplayMiss
from kernelcrew.agents.llm.settings import METHODS, LLMSettings
from kernelcrew.agents.llm.specialists import (
    FIELDS,
    SPECIALISTS,
    KernelAnswer,
    LLMSpecialist,
    PlanAnswer,
    make_specialist,
)

__all__ = [
    "FIELDS",
    "METHODS",
    "SPECIALISTS",
    "Endpoint",
    "FocusedContext",
    "KernelAnswer",
    "LLMClient",
    "LLMCoordinator",
    "LLMSettings",
    "LLMSpecialist",
    "LLMUnavailable",
    "PlanAnswer",
    "PromptTooLarge",
    "Recording",
    "ReplayMiss",
    "build_context",
    "check_reachable",
    "count_tokens",
    "endpoint_for",
    "make_specialist",
    "preflight",
]


def preflight(settings: dict[str, Any] | None = None, timeout: float = 5.0) -> LLMSettings:
    """Before a run: resolve the settings (InputError: no model, no key for OpenAI, bad
    method), check that something listens at the endpoint (LLMUnavailable), and learn what
    the server tells about itself (context size, tokenizer, slots, whether its chat template
    keeps system messages; see `endpoint`)."""
    s = LLMSettings.resolve(settings)
    if s.replay and s.replay_missing == "stop":
        return s  # answered from the recording: no endpoint is asked
    check_reachable(s, timeout=timeout)
    probe(s, build_chat_model(s))
    return s

