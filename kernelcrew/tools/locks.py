"""Machine-wide locks shared by everything that times: two benchmarks never overlap."""

from __future__ import annotations

from filelock import FileLock

from kernelcrew.tools.config import cache_dir


def bench_lock() -> FileLock:
    """Benchmarks never run in parallel with each other, across processes too."""
    return FileLock(str(cache_dir() / "bench.lock"))
