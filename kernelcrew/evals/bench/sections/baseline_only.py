"""Part 2: an operator folder with only a baseline (tests/ops/vadd): no knobs, no hints."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kernelcrew.evals import suite as S
from kernelcrew.evals.bench.section import BenchRun, Section, fmt, status

ROOT = Path(__file__).resolve().parents[4]
BASELINE_ONLY_OP = ROOT / "tests" / "ops" / "vadd"
BASELINE_ONLY_TARGET = 1.3


def run(b: BenchRun) -> None:
    b.say("part 2: the baseline-only operator folder")
    peaks = b.data.get("peaks")
    bo = S.run_operator(str(BASELINE_ONLY_OP), b.settings, b.work / "runs", peaks=peaks,
                        say=b.say)
    b.data["baseline_only"] = bo
    b.runs_for_overhead.append(bo)


def render(data: dict[str, Any]) -> list[str]:
    L: list[str] = []
    add = L.append
    _f = fmt
    add("## 2. An operator folder with only a baseline\n")
    bo: S.OpRow | None = data.get("baseline_only")
    if bo:
        add(f"`{BASELINE_ONLY_OP.relative_to(ROOT)}`: op.yaml, reference.py and a plain "
            "`-O2` baseline; no knobs, no variants, no hints.\n")
        add(S.markdown_table(S.TABLE_HEADERS, [S.table_cells(bo)]))
        add("")
    return L


def goals(data: dict[str, Any]) -> list[list[str]]:
    bo: S.OpRow | None = data.get("baseline_only")
    if not bo:
        return []
    sp = bo.speedup if bo.correct else None
    return [["baseline-only folder speedup (4)", f">= {BASELINE_ONLY_TARGET:g}x",
             fmt(sp, "{:.2f}x"), status(sp is not None and sp >= BASELINE_ONLY_TARGET,
                                        f"{BASELINE_ONLY_TARGET - (sp or 1):.2f}x short")]]


SECTION = Section("baseline-only", render, run, goals)
