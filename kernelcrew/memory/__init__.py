"""Shared vector memory of reflections: what was tried, on what evidence, and how it went."""

from .embedding import (
    HashedSituationEmbedding,
    OpenAICompatibleEmbedding,
    default_embedding,
    embedding_spec,
    provider_embeddings,
    situation_text,
    split_situation,
)
from .reflection import Bottleneck, Reflection
from .store import (
    ChangeKindStats,
    Memory,
    MemoryConfigError,
    MemoryStore,
    MemoryUnavailable,
    MemoryUnavailableWarning,
    NullMemory,
    default_memory_dir,
    render_markdown,
)

__all__ = [
    "Bottleneck",
    "ChangeKindStats",
    "HashedSituationEmbedding",
    "Memory",
    "MemoryConfigError",
    "MemoryStore",
    "MemoryUnavailable",
    "MemoryUnavailableWarning",
    "NullMemory",
    "OpenAICompatibleEmbedding",
    "Reflection",
    "default_embedding",
    "default_memory_dir",
    "embedding_spec",
    "provider_embeddings",
    "render_markdown",
    "situation_text",
    "split_situation",
]
