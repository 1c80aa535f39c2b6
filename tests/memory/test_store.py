from __future__ import annotations

import socket
from pathlib import Path

import pytest

from kernelcrew.memory import (
    HashedSituationEmbedding,
    MemoryConfigError,
    MemoryStore,
    MemoryUnavailable,
    MemoryUnavailableWarning,
    NullMemory,
)

QUERY = {
    "family": "reduction",
    "backend": "cpu",
    "bottleneck": "memory-bound",
    "text": "softmax rows stream from DRAM; the row loop is scalar",
}


@pytest.fixture
def mixed(store: MemoryStore, make_reflection) -> dict[str, str]:
    """Five reflections from different situations; returns name -> id."""
    rows = {
        "same": make_reflection(
            text="Vectorized the row max and sum loops with AVX2; DRAM bandwidth 85% of peak.",
            change_kind="simd",
            iteration=1,
        ),
        "same_fb": make_reflection(
            text="Parallelized rows with OpenMP; FMA units saturated.",
            bottleneck="compute-bound",
            change_kind="omp_parallel",
            iteration=2,
        ),
        "other_family_cpu": make_reflection(
            text="Fused the add and relu into one pass over the tensor.",
            operator="add_relu",
            family="elementwise",
            bottleneck="latency-bound",
            change_kind="fusion",
            iteration=3,
        ),
        "same_family_cuda": make_reflection(
            text="Warp shuffles for the row reduction instead of shared memory.",
            backend="cuda",
            device="H200",
            change_kind="rewrite",
            iteration=4,
        ),
        "unrelated": make_reflection(
            text="Tensor-core tiles of 128x128 with a 4-stage cp.async pipeline.",
            operator="matmul",
            family="gemm",
            backend="cuda",
            bottleneck="compute-bound",
            change_kind="knob:BLOCK",
            iteration=5,
        ),
    }
    for r in rows.values():
        store.add(r)
    return {name: r.id for name, r in rows.items()}


def test_add_list_round_trip(store: MemoryStore, make_reflection) -> None:
    r = make_reflection(text="Multi-line\nreflection | with a pipe.")
    store.add(r)
    assert store.list() == [r]
    assert store.count() == 1


def test_re_adding_the_same_reflection_upserts(store: MemoryStore, make_reflection) -> None:
    store.add(make_reflection(text="first take", speedup=1.2))
    store.add(make_reflection(text="second take", speedup=1.3))
    store.add_many([make_reflection(text="third take"), make_reflection(text="fourth take")])
    [only] = store.list()
    assert only.text == "fourth take"


def test_two_candidates_of_one_author_and_kind_are_two_records(store: MemoryStore,
                                                               make_reflection) -> None:
    store.add(make_reflection(text="flags, first candidate", candidate="a.cpp"))
    store.add(make_reflection(text="flags, second candidate", candidate="b.cpp"))
    assert sorted(r.text for r in store.list()) == ["flags, first candidate",
                                                    "flags, second candidate"]


def test_search_prefers_family_backend_then_backend_then_anything(
    store: MemoryStore, mixed: dict[str, str]
) -> None:
    results = store.search(QUERY, k=5)
    ids = [r.id for r, _ in results]
    assert ids[:3] == [mixed["same"], mixed["same_fb"], mixed["other_family_cpu"]]
    assert set(ids[3:]) == {mixed["same_family_cuda"], mixed["unrelated"]}
    assert len(set(ids)) == 5


def test_embedding_alone_ranks_the_matching_situation_first(
    store: MemoryStore, mixed: dict[str, str]
) -> None:
    # A plain query string carries no filter: the order is the embedding's alone.
    results = store.search(
        "family:reduction backend:cpu bottleneck:memory-bound | row loop bandwidth", k=5
    )
    ids = [r.id for r, _ in results]
    assert ids[0] == mixed["same"]
    assert ids[-1] == mixed["unrelated"]
    scores = [s for _, s in results]
    assert scores == sorted(scores, reverse=True)
    assert -1.0 <= scores[-1] < scores[0] <= 1.0


def test_search_limits_and_handles_an_empty_store(store: MemoryStore, make_reflection) -> None:
    assert store.search(QUERY) == []
    for i in range(4):
        store.add(make_reflection(iteration=i))
    assert len(store.search(QUERY, k=2)) == 2
    assert len(store.search(QUERY, k=10)) == 4


def test_list_filters(store: MemoryStore, mixed: dict[str, str]) -> None:
    assert {r.id for r in store.list(backend="cuda")} == {
        mixed["same_family_cuda"],
        mixed["unrelated"],
    }
    assert [
        r.id for r in store.list(family="reduction", backend="cpu", bottleneck="compute-bound")
    ] == [mixed["same_fb"]]
    assert len(store.list(limit=2)) == 2
    with pytest.raises(TypeError, match="unknown filter"):
        store.list(famliy="reduction")


def test_change_kind_stats(store: MemoryStore, make_reflection) -> None:
    store.add(make_reflection(change_kind="simd", iteration=0, accepted=True, speedup=1.5))
    store.add(make_reflection(change_kind="simd", iteration=1, accepted=True, speedup=2.5))
    store.add(make_reflection(change_kind="simd", iteration=2, accepted=False, speedup=0.9,
                              outcome="slower"))
    store.add(make_reflection(change_kind="flags", iteration=3, accepted=False, speedup=0.0))
    store.add(make_reflection(change_kind="flags", iteration=5, accepted=False, speedup=1.4,
                              outcome="faster-not-best"))
    store.add(
        make_reflection(change_kind="simd", family="gemm", iteration=4, accepted=False, speedup=1.0)
    )
    stats = store.change_kind_stats(family="reduction", backend="cpu")
    assert stats["simd"]["tried"] == 3
    assert stats["simd"]["accepted"] == 2
    assert stats["simd"]["mean_speedup"] == pytest.approx((1.5 + 2.5 + 0.9) / 3)
    assert stats["simd"]["helped"] == 2 and stats["simd"]["failed"] == 1
    # a candidate that beat the incumbent but lost to a better one of its iteration helped;
    # a record without an outcome (schema 1) counts only by `accepted`
    assert stats["flags"] == {"tried": 2, "accepted": 0, "helped": 1, "failed": 0,
                              "mean_speedup": pytest.approx(0.7)}
    assert store.change_kind_stats()["simd"]["tried"] == 4
    assert store.change_kind_stats(family="stencil") == {}


def test_export_markdown_groups_by_family_then_bottleneck(
    store: MemoryStore, mixed: dict[str, str]
) -> None:
    md = store.export_markdown()
    lines = md.splitlines()
    assert lines[0] == "# kernelcrew experience"
    headings = [line for line in lines if line.startswith("#")][1:]
    assert headings == [
        "## elementwise",
        "### latency-bound",
        "## gemm",
        "### compute-bound",
        "## reduction",
        "### compute-bound",
        "### memory-bound",
    ]
    section = md.split("## reduction")[1].split("### memory-bound")[1]
    bullets = [line for line in section.splitlines() if line.startswith("- ")]
    assert len(bullets) == 2  # cpu simd and cuda rewrite
    assert bullets[0].startswith("- **softmax** · `simd` · cpu-agent · accepted · 1.50x")
    assert "AVX2" in bullets[0]


def test_changed_embedding_raises_config_error_naming_the_fix(
    store_path: Path, make_reflection
) -> None:
    MemoryStore.open(store_path, embedding="hashed").add(make_reflection())
    with pytest.raises(MemoryConfigError) as info:
        MemoryStore.open(store_path, embedding=HashedSituationEmbedding(dim=128))
    message = str(info.value)
    assert str(store_path) in message
    assert '"dim": 256' in message and '"dim": 128' in message
    assert "--memory-dir" in message and "kernelcrew memory export" in message
    # The same function opens fine and the data is intact.
    assert len(MemoryStore.open(store_path, embedding=HashedSituationEmbedding()).list()) == 1


class _RenamedEmbedding(HashedSituationEmbedding):
    @staticmethod
    def name() -> str:
        return "kernelcrew-test-renamed"


def test_differently_named_embedding_raises_config_error_not_chroma_value_error(
    store_path: Path,
) -> None:
    MemoryStore.open(store_path)
    with pytest.raises(MemoryConfigError, match="kernelcrew-test-renamed"):
        MemoryStore.open(store_path, embedding=_RenamedEmbedding())


def test_damaged_store_gives_null_memory_and_a_warning(store_path: Path, make_reflection) -> None:
    MemoryStore.open(store_path).add(make_reflection())
    (store_path / "chroma.sqlite3").write_bytes(b"this is not a database" * 100)

    with pytest.raises(MemoryUnavailable) as info:
        MemoryStore.open(store_path)
    assert str(store_path) in str(info.value) and "\n" not in str(info.value)

    with pytest.warns(MemoryUnavailableWarning, match="memory disabled"):
        memory = MemoryStore.open_or_none(store_path)
    assert isinstance(memory, NullMemory) and not memory.available
    memory.add(make_reflection())
    assert memory.list() == [] and memory.search(QUERY) == []
    assert memory.change_kind_stats() == {}
    assert "memory unavailable" in memory.export_markdown()


def test_path_that_is_a_file_gives_null_memory(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.warns(MemoryUnavailableWarning, match="cannot be created"):
        assert isinstance(MemoryStore.open_or_none(blocker / "memory"), NullMemory)


def test_unreachable_server_gives_null_memory() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again before the client connects
    with pytest.warns(MemoryUnavailableWarning, match="unreachable"):
        memory = MemoryStore.open_or_none(url=f"http://127.0.0.1:{port}")
    assert isinstance(memory, NullMemory)


def test_default_location_follows_env(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, make_reflection
) -> None:
    monkeypatch.setenv("KERNELCREW_MEMORY_DIR", str(tmp_path / "from-env"))
    store = MemoryStore.open()
    store.add(make_reflection())
    assert store.location == str(tmp_path / "from-env")
    assert (tmp_path / "from-env" / "chroma.sqlite3").exists()


def test_path_and_url_together_are_rejected(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="either path or url"):
        MemoryStore.open(tmp_path, url="http://127.0.0.1:8000")


def test_a_write_the_store_refuses_once_is_tried_again(store_path: Path, make_reflection) -> None:
    """The run's memory tries a write twice: a store unusable for a moment (here its
    database file damaged, then put back) loses no reflection."""
    import threading
    import time

    from kernelcrew.graph import memory as run_memory

    store = MemoryStore.open(store_path, embedding="hashed")
    store.add(make_reflection(change_kind="simd"))
    db = store_path / "chroma.sqlite3"
    good = db.read_bytes()
    db.write_bytes(b"this is not a database" * 100)
    put_back = threading.Timer(run_memory.RETRY_PAUSE_S / 2, db.write_bytes, (good,))
    put_back.start()
    t0 = time.monotonic()
    assert run_memory.SafeMemory(store).add(make_reflection(change_kind="unroll")) == ""
    assert time.monotonic() - t0 >= run_memory.RETRY_PAUSE_S  # the first write failed
    put_back.join()
    assert {r.change_kind for r in MemoryStore.open(store_path).list()} == {"simd", "unroll"}


def test_a_write_that_fails_twice_says_why_and_the_run_goes_on(
        store_path: Path, make_reflection) -> None:
    from kernelcrew.graph.memory import SafeMemory

    store = MemoryStore.open(store_path, embedding="hashed")
    (store_path / "chroma.sqlite3").write_bytes(b"this is not a database" * 100)
    memory = SafeMemory(store)
    with pytest.warns(UserWarning, match="add failed, continuing without"):
        why = memory.add(make_reflection())
    assert str(store_path) in why and "\n" not in why and not memory.available
    assert memory.add(make_reflection()) == why  # later writes say the same, and do not raise
