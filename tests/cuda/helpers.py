"""Paths and the CLI runner shared by the CUDA tests."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from kernelcrew.kernels.spec import LIBRARY, library_ops

HERE = Path(__file__).parent
FIXTURES = HERE / "fixtures"
TEST_KERNELS = HERE.parent / "kernels"
CLI = Path(sys.executable).parent / "kernelcrew"
# the library ops that have a CUDA baseline (the newer families are CPU-only so far)
OPS = [op for op in library_ops() if (LIBRARY / op / "baseline.cu").exists()]


def baseline_cu(op: str) -> Path:
    return LIBRARY / op / "baseline.cu"


def fast_cu(op: str) -> Path:
    return TEST_KERNELS / op / "fast.cu"


def run_cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    """The real `kernelcrew` command (the installed script), as a user runs it."""
    exe = [str(CLI)] if CLI.exists() else [sys.executable, "-m", "kernelcrew.cli"]
    return subprocess.run([*exe, *args], capture_output=True, text=True, timeout=timeout,
                          env={**os.environ}, check=False)
