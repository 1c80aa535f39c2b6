"""Part 7: `kernelcrew eval` with the local executor against Ray with two local nodes, side
by side in one run (issue 19); the measuring and the rendering live in
kernelcrew/evals/bench_executors.py."""

from __future__ import annotations

from typing import Any

from kernelcrew.evals import bench_executors as BE
from kernelcrew.evals.bench.section import BenchRun, Section


def run(b: BenchRun) -> None:
    b.data["executors"] = BE.compare_executors(b.ops[:2], b.work / "executors", b.say,
                                               budget=2, reps=b.settings.reps)


def render(data: dict[str, Any]) -> list[str]:
    if not data.get("executors"):
        return ["## Executors: local against Ray with two local nodes\n",
                "Not measured in this run (skipped).\n"]
    return BE.render(data["executors"]).splitlines()


SECTION = Section(key="executors", render=render, run=run)
