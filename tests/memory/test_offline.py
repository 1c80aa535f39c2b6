"""Nothing downloads a model: a run with memory, and the memory commands, work with every
connection off the machine refused, and leave no embedding model in the caches."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kernelcrew.memory.minilm import model_installed
from tests.conftest import OPS, ROOT

# Runs the CLI with every name lookup and socket connection to anything but the loopback
# refused and written to a log. The sandboxed kernel workers run without network anyway.
GUARD = r'''
import json, runpy, socket, sys
LOG = sys.argv.pop(1)
_connect = socket.socket.connect

def connect(self, address):
    host = address[0] if isinstance(address, tuple) else str(address)
    if self.family in (socket.AF_INET, socket.AF_INET6) and host not in (
            "127.0.0.1", "::1", "localhost"):
        with open(LOG, "a") as f:
            f.write(json.dumps(str(address)) + "\n")
        raise OSError(f"offline test: connection to {address} refused")
    return _connect(self, address)

_getaddrinfo = socket.getaddrinfo

def getaddrinfo(host, *args, **kw):  # a lookup is an attempt too, even if DNS fails here
    if host not in (None, "127.0.0.1", "::1", "localhost"):
        with open(LOG, "a") as f:
            f.write(json.dumps(f"lookup {host}") + "\n")
        raise OSError(f"offline test: lookup of {host} refused")
    return _getaddrinfo(host, *args, **kw)

socket.socket.connect = connect
socket.getaddrinfo = getaddrinfo
sys.argv[0] = "kernelcrew"
runpy.run_module("kernelcrew.cli", run_name="__main__")
'''


def _offline(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    guard = tmp_path / "guard.py"
    guard.write_text(GUARD)
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    env = {**os.environ, "HOME": str(home), "XDG_CACHE_HOME": str(home / ".cache"),
           "HF_HOME": str(home / "hf"), "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, str(guard), str(tmp_path / "connections.log"),
                           *args], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=400, check=False)


def _model_files(home: Path) -> list[str]:
    return [str(p.relative_to(home)) for p in home.rglob("*")
            if p.is_file() and any(s in p.name.lower() for s in (".onnx", ".bin", "tokenizer",
                                                                   ".safetensors"))]


@pytest.mark.slow  # a crew run with memory, then the memory commands: about 30 s
def test_a_run_with_memory_and_the_memory_commands_download_nothing(tmp_path):
    # The run uses the sentence model where it is installed (the dev install has it), and
    # the memory commands then use both embeddings; one run keeps the test short.
    embedding, other = ("minilm", "hashed") if model_installed() else ("hashed", "minilm")
    mem = tmp_path / "mem"
    run = _offline(tmp_path, "optimize", str(OPS / "vadd"), "--backend", "cpu",
                   "--max-iters", "1", "--reps", "3", "--memory-dir", str(mem),
                   "--memory-embedding", embedding, "--run-dir", str(tmp_path / "run"),
                   "--json")
    assert run.returncode == 0, run.stderr[-2000:]
    result = json.loads(run.stdout)
    # auto: the search opens the store with the embedding it was built with
    search = _offline(tmp_path, "memory", "search", "vectorized add, memory-bound",
                      "--memory-dir", str(mem), "--json")
    assert search.returncode == 0, search.stderr[-2000:]
    hits = json.loads(search.stdout)
    # the store was written and searched (with the offline embedding) ...
    assert hits and all(h["run_id"] == result["run_id"] for h in hits)
    # ... it was built with the embedding asked for ...
    refused = _offline(tmp_path, "memory", "list", "--memory-dir", str(mem),
                       "--memory-embedding", other)
    assert refused.returncode == 2 and f"built with embedding {embedding}" in refused.stderr
    # ... the other embedding makes and searches a store of its own where it can
    if model_installed():
        mem2 = tmp_path / "mem2"
        made = _offline(tmp_path, "memory", "search", "anything", "--memory-dir", str(mem2),
                        "--memory-embedding", other, "--json")
        assert made.returncode == 0 and json.loads(made.stdout) == [], made.stderr[-2000:]
    # ... and nothing tried to reach another machine or left a model behind
    log = tmp_path / "connections.log"
    assert not log.exists(), log.read_text()
    assert _model_files(tmp_path / "home") == []
    assert not (tmp_path / "home" / ".cache" / "chroma").exists()
