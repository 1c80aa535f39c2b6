from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest
from chromadb.utils.embedding_functions import config_to_embedding_function

from kernelcrew.memory import (
    HashedSituationEmbedding,
    embedding_spec,
    situation_text,
    split_situation,
)


def _cos(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.dot(a, b) / (np.linalg.norm(a) * np.linalg.norm(b)))


def test_situation_text_format_and_split() -> None:
    s = situation_text(
        "Unrolled | the loop",
        family="reduction",
        backend="cpu",
        bottleneck="memory-bound",
        change_kind="knob:BLOCK",
    )
    assert (
        s
        == "family:reduction backend:cpu bottleneck:memory-bound change:knob:block | Unrolled | the loop"
    )
    tags, text = split_situation(s)
    assert tags == {
        "family": "reduction",
        "backend": "cpu",
        "bottleneck": "memory-bound",
        "change": "knob:block",
    }
    assert text == "Unrolled | the loop"
    assert situation_text("just text") == "just text"


def test_vectors_are_unit_length_and_fixed_dimension() -> None:
    ef = HashedSituationEmbedding(dim=64)
    vecs = ef(["family:reduction | hello world", "", "x"])
    assert [len(v) for v in vecs] == [64, 64, 64]
    for v in vecs:
        assert np.linalg.norm(v) == pytest.approx(1.0, abs=1e-5)


def test_vectors_identical_in_another_process() -> None:
    doc = situation_text("tiled the loads into shared memory", family="gemm", backend="cuda")
    here = HashedSituationEmbedding()([doc])[0].tolist()
    code = (
        "import json, sys; from kernelcrew.memory import HashedSituationEmbedding as E; "
        "print(json.dumps(E()([sys.argv[1]])[0].tolist()))"
    )
    # A different hash seed would change any vector built on Python's hash().
    out = subprocess.run(
        [sys.executable, "-c", code, doc],
        capture_output=True,
        text=True,
        check=True,
        env={"PYTHONHASHSEED": "12345", "PATH": ""},
    )
    assert json.loads(out.stdout) == here


def test_situation_tags_outweigh_wording() -> None:
    ef = HashedSituationEmbedding()
    same_situation = situation_text(
        "raised the block size", family="reduction", backend="cpu", bottleneck="memory-bound"
    )
    query = situation_text(
        "vectorized the inner loop", family="reduction", backend="cpu", bottleneck="memory-bound"
    )
    same_words = situation_text(
        "vectorized the inner loop", family="gemm", backend="cuda", bottleneck="compute-bound"
    )
    q, a, b = ef([query, same_situation, same_words])
    assert _cos(q, a) > _cos(q, b)


def test_shared_words_raise_similarity_within_a_situation() -> None:
    ef = HashedSituationEmbedding()
    tags = {"family": "reduction", "backend": "cpu"}
    q, a, b = ef(
        [
            situation_text("vectorized the inner loop with avx2", **tags),
            situation_text("inner loop vectorized using avx2 intrinsics", **tags),
            situation_text("changed compiler flags to -O3", **tags),
        ]
    )
    assert _cos(q, a) > _cos(q, b)


def test_registered_with_chroma_and_rebuilt_from_config() -> None:
    ef = HashedSituationEmbedding(dim=128)
    assert not ef.is_legacy()
    rebuilt = config_to_embedding_function({"name": ef.name(), "config": ef.get_config()})
    assert isinstance(rebuilt, HashedSituationEmbedding) and rebuilt.dim == 128
    assert json.loads(embedding_spec(ef)) == {
        "name": "kernelcrew-hashed-situation",
        "config": {"dim": 128, "version": 1},
    }
    with pytest.raises(ValueError, match="dim"):
        HashedSituationEmbedding(dim=3)


def test_provider_embeddings_construct_offline_and_keep_key_out_of_config() -> None:
    pytest.importorskip("langchain_openai")
    from kernelcrew.memory import provider_embeddings

    ef = provider_embeddings("http://127.0.0.1:9/v1", "nomic-embed-text", api_key="sk-secret")
    assert ef.name() == "kernelcrew-openai-compatible"
    assert "sk-secret" not in json.dumps(ef.get_config())
    assert not ef.is_legacy()
