"""Shared profiles: each (op, kernel) is profiled once per session, through the real
compiler, the sandboxed worker and (where it works) perf."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernelcrew.results import ProfileResult
from kernelcrew.tools.config import BenchSettings
from kernelcrew.tools.observe.profile import profile

REPO = Path(__file__).resolve().parents[2]
FAST = REPO / "tests" / "kernels"
# a profile needs a median, not a gate decision: few runs, one input set
BENCH = BenchSettings(reps=7, input_sets=1)


@pytest.fixture(scope="session")
def profiled():
    """profiled(op, kernel=None, case=None, threads=None) -> ProfileResult, cached for the
    session."""
    cache: dict[tuple, ProfileResult] = {}

    def get(op: str, kernel: str | Path | None = None, case: str | None = None,
            threads: int | None = None) -> ProfileResult:
        key = (op, str(kernel), case, threads)
        if key not in cache:
            cache[key] = profile(op, kernel, "cpu", case=case, bench=BENCH, threads=threads)
        return cache[key]

    return get


def fast_kernel(op: str) -> Path:
    return FAST / op / "fast.cpp"
