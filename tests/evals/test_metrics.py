"""The suite's metrics and trace readings, on hand-made rows and traces (no compiler)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from kernelcrew.evals.peers import evals_to_target
from kernelcrew.evals.suite import (
    OpRow,
    accepted_trajectory,
    evals_to_reach,
    evaluation_sequence,
    fast_p,
    geomean,
    overhead_split,
    summarize,
)


def row(op: str, speedup: float | None, correct: bool = True) -> OpRow:
    return OpRow(op=op, speedup=speedup, correct=correct)


def test_geomean_of_speedups() -> None:
    assert geomean([2.0, 8.0]) == pytest.approx(4.0)
    assert geomean([1.5]) == pytest.approx(1.5)
    assert geomean([]) is None
    assert geomean([0.0, None, 4.0]) == pytest.approx(4.0)  # non-positive and missing skipped


def test_fast_p_counts_correct_and_at_least_p_times_faster() -> None:
    rows = [row("a", 1.0), row("b", 1.49), row("c", 1.5), row("d", 3.0), row("e", 5.0, False)]
    assert fast_p(rows, 1.0) == pytest.approx(4 / 5)  # e is incorrect, however fast
    assert fast_p(rows, 1.5) == pytest.approx(2 / 5)  # 1.5 counts, 1.49 does not
    assert fast_p(rows, 2.0) == pytest.approx(1 / 5)
    assert fast_p([], 1.0) == 0.0


def test_summary_counts_a_failed_run_as_the_baseline() -> None:
    rows = [row("a", 4.0), OpRow(op="b", error="boom"), row("c", 9.0, correct=False)]
    s = summarize(rows)
    assert s["geomean_speedup"] == pytest.approx(4.0 ** (1 / 3))
    assert s["fast_p"] == {"1": pytest.approx(1 / 3), "1.5": pytest.approx(1 / 3),
                           "2": pytest.approx(1 / 3)}
    assert s["correct"] == 1


def test_evals_to_target_uses_the_best_so_far() -> None:
    assert evals_to_target([10.0, 5.0, 7.0, 4.0], 5.2) == 2
    assert evals_to_target([10.0, None, 4.9], 5.0) == 3
    assert evals_to_target([10.0, 9.0], 5.0) is None
    assert evals_to_target([], 1.0) is None


def _write_trace(run_dir: Path, events: list[dict]) -> None:
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "trace.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))


def test_overhead_counts_parallel_specialists_once_and_uncovered_time(tmp_path: Path) -> None:
    _write_trace(tmp_path, [
        {"node": "baseline", "duration_s": 2.0, "iteration": 0},
        {"node": "observe", "duration_s": 1.0, "iteration": 1},
        {"node": "specialist", "duration_s": 0.3, "iteration": 1},
        {"node": "specialist", "duration_s": 0.5, "iteration": 1},  # in parallel: max counts
        {"node": "plan", "duration_s": 0.2, "iteration": 1},  # inside a specialist's span
        {"node": "coordinator", "duration_s": 0.1, "iteration": 1},
        {"node": "execute", "duration_s": 1.0, "iteration": 1},
        {"node": "verify", "duration_s": 1.0, "iteration": 1},
        {"node": "benchmark", "duration_s": 3.0, "iteration": 1},
        {"node": "gate", "duration_s": 0.0, "iteration": 1},
        {"node": "reflect", "duration_s": 0.1, "iteration": 1},
        {"node": "finalize", "duration_s": 1.0, "iteration": 1},
    ])
    o = overhead_split(tmp_path, wall_s=10.5)
    assert o["measure_s"] == pytest.approx(9.0)
    assert o["agents_s"] == pytest.approx(0.7)
    assert o["uncovered_s"] == pytest.approx(0.8)
    assert o["overhead_share"] == pytest.approx(1.5 / 10.5)


def test_evaluation_order_and_accepted_trajectory(tmp_path: Path) -> None:
    k = [str(tmp_path / f"c{i}.cpp") for i in range(4)]
    _write_trace(tmp_path, [
        {"node": "verify", "iteration": 1, "refs": {"kernel": k[0]}, "correct": True},
        {"node": "verify", "iteration": 1, "refs": {"kernel": k[1]}, "correct": False},
        {"node": "benchmark", "iteration": 1, "refs": {"kernel": k[0]}, "verdict": "faster",
         "vs_best": 1.5, "rows": [{"group": "typical", "median_ms": 2.0}]},
        {"node": "verify", "iteration": 2, "refs": {"kernel": k[2]}, "correct": True},
        {"node": "verify", "iteration": 2, "refs": {"kernel": k[3]}, "correct": True},
    ])
    seq = evaluation_sequence(tmp_path)
    assert [s["kernel"] for s in seq] == k
    assert seq[0]["verdict"] == "faster" and seq[1]["correct"] is False
    result = {"accepted": [{"path": k[0], "speedup": 1.5}, {"path": k[3], "speedup": 2.5}]}
    traj = accepted_trajectory(tmp_path, result)
    # counted to the end of each accepted candidate's iteration: the gate raced them all
    assert [(n, s) for n, s, _ in traj] == [(2, 1.5), (4, 2.5)]
    assert evals_to_reach(traj, 2.0) == 4
    assert evals_to_reach(traj, 1.0) == 0
    assert evals_to_reach(traj, 3.0) is None
    assert math.isclose(traj[-1][1], 2.5)
