"""Shared vector memory of reflections: what was tried, on what evidence, and how it went."""

from .embedding import (
    EMBEDDING_CHOICES,
    EmbeddingUnavailable,
    HashedSituationEmbedding,
    MiniLMSituationEmbedding,
    OpenAICompatibleEmbedding,
    default_embedding,
    embedding_by_name,
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
    "EMBEDDING_CHOICES",
    "Bottleneck",
    "ChangeKindStats",
    "EmbeddingUnavailable",
    "HashedSituationEmbedding",
    "Memory",
    "MemoryConfigError",
    "MemoryStore",
    "MemoryUnavailable",
    "MemoryUnavailableWarning",
    "MiniLMSituationEmbedding",
    "NullMemory",
    "OpenAICompatibleEmbedding",
    "Reflection",
    "default_embedding",
    "default_memory_dir",
    "embedding_by_name",
    "embedding_spec",
    "provider_embeddings",
    "render_markdown",
    "situation_text",
    "split_situation",
]
