"""Timeouts, limits and directories, named in one place."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

import platformdirs


def cache_dir() -> Path:
    p = Path(os.environ.get("KERNELCREW_CACHE_DIR") or platformdirs.user_cache_dir("kernelcrew"))
    p.mkdir(parents=True, exist_ok=True)
    return p


def scratch_root() -> Path:
    """Where per-run scratch lives: RAM-backed when the machine has /dev/shm."""
    base = os.environ.get("KERNELCREW_SCRATCH")
    if base:
        p = Path(base)
    elif Path("/dev/shm").is_dir() and os.access("/dev/shm", os.W_OK):
        p = Path("/dev/shm") / f"kernelcrew-{os.getuid()}"
    else:
        p = cache_dir() / "scratch"
    p.mkdir(parents=True, exist_ok=True)
    return p


@dataclass(frozen=True, kw_only=True)
class Limits:
    """Limits of one worker process (a kernel under test)."""

    timeout_s: float = field(default_factory=lambda: float(os.environ.get("KERNELCREW_TIMEOUT", "30")))
    address_space_gib: float = 16.0  # RLIMIT_AS; OpenMP stacks and NumPy need headroom
    file_size_mib: int = 2048  # RLIMIT_FSIZE: outputs are written as .npy files
    processes: int = 64  # extra processes/threads a kernel may start
    open_files: int = 256


@dataclass(frozen=True, kw_only=True)
class CompileLimits:
    timeout_s: float = field(
        default_factory=lambda: float(os.environ.get("KERNELCREW_COMPILE_TIMEOUT", "120")))
    address_space_gib: float = 8.0
    file_size_mib: int = 256


@dataclass(frozen=True, kw_only=True)
class BenchSettings:
    """How timing is done; see docs/judging.md, 'Timing: a duel' and 'The gate'."""

    reps: int = field(default_factory=lambda: int(os.environ.get("KERNELCREW_REPS", "20")))
    warmup: int = 3
    input_sets: int = 2  # timed runs rotate over these so caches/replay cannot help
    min_speedup: float = 0.10  # a win must clear this as well as the noise band
    # baseline and candidate are timed in many short alternating rounds within one pair of
    # workers (kernelcrew.tools.judge.duel); the spread of the per-round speedups is the noise
    # (see gate.decide)
    rounds: int = field(default_factory=lambda: int(os.environ.get("KERNELCREW_ROUNDS", "20")))
    # "" (each op's `cache:`), or cold / warm / auto for every op
    cache: str = field(default_factory=lambda: os.environ.get("KERNELCREW_CACHE", ""))
