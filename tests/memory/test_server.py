"""MemoryStore against a real `chroma run` server."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from kernelcrew.memory import HashedSituationEmbedding, MemoryConfigError, MemoryStore

CHROMA = Path(sys.executable).parent / "chroma"
STARTUP_TIMEOUT_S = 60.0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def server_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    if not CHROMA.exists():
        pytest.skip(f"chroma CLI not found at {CHROMA}; it ships with the chromadb package")
    root = tmp_path_factory.mktemp("chroma-server")
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    with open(root / "server.log", "wb") as log:
        proc = subprocess.Popen(
            [
                CHROMA,
                "run",
                "--path",
                str(root / "data"),
                "--port",
                str(port),
                "--host",
                "127.0.0.1",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    try:
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        while True:
            if proc.poll() is not None:
                log_tail = (root / "server.log").read_text(errors="replace")[-2000:]
                pytest.fail(f"chroma server exited with {proc.returncode}:\n{log_tail}")
            try:
                with urllib.request.urlopen(f"{url}/api/v2/heartbeat", timeout=1):
                    break
            except OSError:
                if time.monotonic() > deadline:
                    pytest.fail(f"chroma server on {url} did not answer in {STARTUP_TIMEOUT_S} s")
                time.sleep(0.1)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def test_add_search_and_stats_through_server(server_url: str, make_reflection) -> None:
    store = MemoryStore.open(url=server_url)
    near = make_reflection(text="AVX2 over the row loop; bandwidth-limited now.", iteration=1)
    far = make_reflection(
        text="Bigger tiles for tensor cores.",
        family="gemm",
        backend="cuda",
        bottleneck="compute-bound",
        change_kind="knob:BLOCK",
        accepted=False,
        speedup=0.8,
        iteration=2,
    )
    store.add(near)
    store.add(far)
    store.add(near)  # idempotent on the server too

    again = MemoryStore.open(url=server_url)  # a second client sees the same data
    assert {r.id for r in again.list()} == {near.id, far.id}
    results = again.search(
        {"family": "reduction", "backend": "cpu", "bottleneck": "memory-bound", "text": "row"}
    )
    assert [r.id for r, _ in results] == [near.id, far.id]
    assert again.change_kind_stats(backend="cuda") == {
        "knob:BLOCK": {"tried": 1, "accepted": 0, "helped": 0, "failed": 0, "mean_speedup": 0.8}
    }


def test_changed_embedding_on_server_raises_config_error(server_url: str) -> None:
    MemoryStore.open(url=server_url)
    with pytest.raises(MemoryConfigError, match=server_url):
        MemoryStore.open(url=server_url, embedding=HashedSituationEmbedding(dim=64))
