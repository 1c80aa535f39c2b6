"""Fixtures for the memory tests: real Chroma stores under tmp_path."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from kernelcrew.memory import MemoryStore, MiniLMSituationEmbedding, Reflection
from kernelcrew.memory.minilm import INSTALL_HINT, model_installed

DEFAULTS: dict[str, Any] = {
    "text": "Tried something; it helped a little.",
    "operator": "softmax",
    "family": "reduction",
    "backend": "cpu",
    "device": "xeon",
    "bottleneck": "memory-bound",
    "change_kind": "simd",
    "author": "cpu-agent",
    "accepted": True,
    "speedup": 1.5,
    "run_id": "run-a",
    "iteration": 0,
}


MakeReflection = Callable[..., Reflection]


@pytest.fixture
def make_reflection() -> MakeReflection:
    """Factory of valid reflections; tests override only the fields they are about."""

    def make(**overrides: Any) -> Reflection:
        return Reflection(**{**DEFAULTS, **overrides})

    return make


@pytest.fixture
def store_path(tmp_path: Path) -> Path:
    return tmp_path / "memory"


@pytest.fixture
def store(store_path: Path) -> MemoryStore:
    # hashed: these tests are about the store, and their rankings assume its tag weights
    return MemoryStore.open(store_path, embedding="hashed")


@pytest.fixture(scope="session")
def minilm() -> MiniLMSituationEmbedding:
    """The sentence-model embedding, loaded once for the session (the model package is in
    the dev install: `make venv`)."""
    if not model_installed():
        pytest.skip(f"the model package is not installed: {INSTALL_HINT}")
    return MiniLMSituationEmbedding()
