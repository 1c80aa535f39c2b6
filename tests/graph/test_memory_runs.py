"""The shared memory across runs: retrieval and use, concurrent writers, a Chroma server."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kernelcrew.memory.store import MemoryStore, MemoryUnavailable
from kernelcrew.trace import read_trace
from tests.conftest import OPS, ROOT


def optimize(op: str, run_dir: Path, *extra: str, env: dict | None = None,
             wait: bool = True):
    cmd = [sys.executable, "-m", "kernelcrew.cli", "optimize", str(OPS / op), "--backend", "cpu",
           "--max-iters", "1", "--reps", "4", "--run-dir", str(run_dir), "--json", *extra]
    kw = {"cwd": ROOT, "env": {**os.environ, **(env or {})}, "stdout": subprocess.PIPE,
          "stderr": subprocess.PIPE, "text": True}
    if not wait:
        return subprocess.Popen(cmd, **kw)
    res = subprocess.run(cmd, timeout=400, check=False, **kw)
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout)


@pytest.mark.slow  # two crew runs: about 35 s
def test_second_run_of_the_family_retrieves_and_uses_the_first_runs_reflections(tmp_path):
    # the first op is compute-bound with calls of milliseconds, so its changes help on any
    # machine (vadd's calls are under the timing floor: nothing helps there, nothing is
    # proven, and memory has nothing to narrow)
    mem = str(tmp_path / "mem")
    first = optimize("vpoly", tmp_path / "a", "--memory-dir", mem)
    second = optimize("axpy", tmp_path / "b", "--memory-dir", mem)
    assert first["op"] == "vpoly" and second["op"] == "axpy"
    assert first["best"]["speedup"] > 1.5, first["best"]
    trace = read_trace(tmp_path / "b")
    observe = next(e for e in trace if e["node"] == "observe")
    recalled = observe["reflections"]
    assert recalled and all("[vpoly/" in r for r in recalled)
    # used: the coordinator weighs the proposals by the first run's track record. From an
    # empty store it hedges its merge with single proposals; with the first run's record
    # of these kinds of change (they helped on vpoly) it evaluates fewer candidates
    coord = next(e for e in trace if e["node"] == "coordinator")
    assert "memory: " in coord["summary"] + " ".join(coord["rejected"])
    coord_a = next(e for e in read_trace(tmp_path / "a") if e["node"] == "coordinator")
    assert "on its own" in coord_a["summary"] and "memory: " not in coord_a["summary"]
    assert len(coord["candidates"]) < len(coord_a["candidates"])


@pytest.mark.slow  # two crew runs at once: about 26 s
def test_two_runs_at_once_on_one_local_store_lose_no_reflection(tmp_path):
    mem = str(tmp_path / "mem")
    procs = [optimize(op, tmp_path / op, "--memory-dir", mem, wait=False)
             for op in ("vadd", "axpy")]
    results = []
    for p in procs:
        out, err = p.communicate(timeout=600)
        assert p.returncode == 0, err
        results.append(json.loads(out))
    store = MemoryStore.open(path=mem)
    for r in results:
        run = read_trace(r["run_dir"])
        written = [e for e in run if e["node"] == "reflect"]
        stored = store.list(run_id=r["run_id"])
        assert len(stored) == len(written) > 0
        assert {s.text[:300] for s in stored} == {e["summary"] for e in written}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow  # a Chroma server and a crew run: about 21 s
def test_run_against_a_real_chroma_server(tmp_path):
    chroma = Path(sys.executable).parent / "chroma"
    if not chroma.exists():
        pytest.skip("the chroma CLI is not installed in this environment")
    port = _free_port()
    server = subprocess.Popen([str(chroma), "run", "--path", str(tmp_path / "srv"), "--host",
                               "127.0.0.1", "--port", str(port)], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    try:
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while True:
            try:
                MemoryStore.open(url=url)
                break
            except MemoryUnavailable:  # not up yet
                if time.monotonic() > deadline:
                    pytest.fail("chroma server did not come up within 60 s")
                time.sleep(0.5)
        result = optimize("vadd", tmp_path / "run", "--memory-url", url)
        stored = MemoryStore.open(url=url).list(run_id=result["run_id"])
        assert stored and all(s.operator == "vadd" for s in stored)
    finally:
        server.terminate()
        server.wait(timeout=20)
