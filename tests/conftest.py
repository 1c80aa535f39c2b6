"""Shared fixtures. Tests use real compilers, real worker processes and real files."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
OPS = Path(__file__).resolve().parent / "ops"
LIBRARY = ROOT / "kernelcrew" / "kernels" / "library"


@pytest.fixture(scope="session", autouse=True)
def _isolated_dirs(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Caches, memory and runs of the test session live in a temporary folder."""
    base = tmp_path_factory.mktemp("kc")
    for var, sub in (("KERNELCREW_CACHE_DIR", "cache"), ("KERNELCREW_MEMORY_DIR", "memory"),
                     ("KERNELCREW_RUNS_DIR", "runs")):
        os.environ.setdefault(var, str(base / sub))
    os.environ.setdefault("KERNELCREW_REPS", "6")
    os.environ.setdefault("KERNELCREW_ROUNDS", "2")  # under 3 rounds the band is the
    # minimum speedup alone (no noise estimate), so crew tests on a busy machine do not
    # hinge on its noise; the gate's honesty at the default 20 rounds is measured by
    # scripts/gate_honesty.py, its statistics unit-tested in tests/test_gate.py


def kernelcrew(*args: str, timeout: float = 300, env: dict | None = None
               ) -> subprocess.CompletedProcess:
    """Run the real CLI in a subprocess."""
    return subprocess.run([sys.executable, "-m", "kernelcrew.cli", *args], check=False, capture_output=True,
                          text=True, timeout=timeout, cwd=ROOT, env={**os.environ, **(env or {})})


@pytest.fixture
def op_copy(tmp_path: Path):
    """Copy an operator folder (tests/ops or library) into tmp_path to mutate it."""

    def make(name: str) -> Path:
        src = OPS / name if (OPS / name).is_dir() else LIBRARY / name
        dst = tmp_path / name
        shutil.copytree(src, dst)
        return dst

    return make
