"""What a part of `make bench` is: a Section measures into the run's data, renders its part
of docs/results.md from that data alone, and may add rows to the goals table.

To add a part: write a module under `kernelcrew/evals/bench/sections/` with a `SECTION`
and list it in `sections/__init__.py` where it belongs in the order. `--skip KEY` leaves its
measurement out; its render then says what was not measured (or writes nothing).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kernelcrew.evals import suite as S


class Progress:
    """Progress lines on stderr, each with the bench's elapsed time."""

    def __init__(self) -> None:
        self.t0 = time.monotonic()

    def __call__(self, msg: str) -> None:
        m, s = divmod(int(time.monotonic() - self.t0), 60)
        print(f"[bench {m:3d}:{s:02d}] {msg}", file=sys.stderr, flush=True)

    @property
    def minutes(self) -> float:
        return (time.monotonic() - self.t0) / 60


@dataclass
class BenchRun:
    """One `make bench`: its settings, scratch, progress and the data every part writes."""

    ops: list[str]
    settings: S.EvalSettings
    work: Path
    say: Progress
    options: dict[str, Any]  # the command line's values (reps, budgets, seeds)
    skip: set[str] = field(default_factory=set)
    data: dict[str, Any] = field(default_factory=dict)
    runs_for_overhead: list[S.OpRow] = field(default_factory=list)


@dataclass(frozen=True)
class Section:
    key: str  # the name --skip takes
    render: Callable[[dict[str, Any]], list[str]]  # markdown lines from the data alone
    run: Callable[[BenchRun], None] | None = None  # measures; None: renders others' data
    goals: Callable[[dict[str, Any]], list[list[str]]] | None = None  # rows of the goals table
    needs: tuple[str, ...] = ()  # keys of sections whose data it reads


def fmt(v: Any, f: str = "{:.3g}") -> str:
    return S._f(v, f)


def status(ok: bool, miss: str) -> str:
    return "**met**" if ok else f"**missed**: {miss}"
