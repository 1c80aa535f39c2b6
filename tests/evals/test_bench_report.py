"""docs/results.md is rendered from measured data only; each goal is marked met or missed
by how much. Built here from hand-made results (no crew run)."""

from __future__ import annotations

from kernelcrew.evals import bench as B
from kernelcrew.evals import peers as P
from kernelcrew.evals import suite as S


def _row(op: str, speedup: float, best_ms: float, **kw) -> S.OpRow:
    return S.OpRow(op=op, speedup=speedup, correct=True, baseline_ms=best_ms * speedup,
                   best_ms=best_ms, evaluations=6, iterations=3, wall_s=100.0,
                   stop_reason=kw.pop("stop_reason", "patience"), **kw)


def _data() -> dict:
    rows = [_row("small_matmul", 2.0, 10.0), _row("transpose", 4.0, 5.0,
                                                    stop_reason="wall-clock budget of 150 s")]
    suite = S.SuiteResult(settings={"budget": 8, "reps": 10, "seed": 0, "wall_budget_s": 150.0},
                          machine={"cpu": "test cpu", "isa": "sse4_2 avx avx2 fma", "cores": 2,
                                   "compiler": "g++ 12"},
                          rows=rows, summary=S.summarize(rows), started="now", seconds=1.0)
    kt = P.KernelTunerResult(op="transpose", tunable="t.cpp", case="rows=1", space={"TILE": [8]},
                             size=12, optimum={"TILE": 32}, optimum_ms=5.0, strategies=[
                                 P.StrategyResult("brute_force", 1, [5], [12], 5, 1, "measured"),
                                 P.StrategyResult("random_sample", 5, [3, 4, 4, 9, None],
                                                  [12] * 5, 4, 4, "replayed")])
    return {
        "suite": suite, "date": "today", "minutes": 1.0, "peaks": P.Peaks(10.0, 100.0, "test"),
        "numpy": {"small_matmul": P.NumpyResult("small_matmul", "np.matmul(a, b)",
                                                typical_ms=2.5),
                  "transpose": P.NumpyResult("transpose", "x.T", typical_ms=50.0)},
        "knobs": [B.KnobSearch("transpose", kt, crew_evals=3, crew_total_evals=6)],
        "overhead": {"all": {"wall_s": 100.0, "measure_s": 95.0, "agents_s": 3.0,
                             "uncovered_s": 2.0, "overhead_s": 5.0, "overhead_share": 0.05}},
        "bandwidth_shares": {"transpose": 0.8, "small_matmul": 0.1},
        "roofline_rows": [], "method_notes": ["a note"], "noise": {},
    }


def test_goals_are_marked_met_or_missed_by_how_much() -> None:
    text = B.render(_data())
    goals = {line.split(" | ")[0].lstrip("| "): line for line in text.splitlines()
             if line.startswith("| ") and ("(4)" in line or "(8)" in line)}
    assert "**missed**: 1.00x short" in goals["small_matmul speedup, correct (4)"]
    transpose = goals["transpose speedup, correct (4)"]
    assert "**met**" in transpose and "cut by the wall budget" in transpose
    assert "**met**" in goals["crew overhead share of wall time (4)"]
    numpy_goal = goals["crew's best beats NumPy on every library op (8)"]
    assert "1 of 2" in numpy_goal and "small_matmul: crew at 0.25x" in numpy_goal
    bw = goals["memory-bound ops reach >= 70% of measured peak bandwidth (8)"]
    assert "small_matmul 60 points short" in bw
    kt = next(v for k, v in goals.items() if k.startswith("crew needs fewer evaluations"))
    assert "1 of 1" in kt and "**missed**: 3 op(s) short" in kt  # 3 < 4 evaluations: a win


def test_report_has_every_part() -> None:
    text = B.render(_data())
    for heading in ("## Machine and settings", "## Goals", "## 1. Eval suite",
                    "## 4. The crew's overhead", "### 5a. NumPy", "### 5b. Kernel Tuner",
                    "### 5c. The physical bound", "## Method notes"):
        assert heading in text, heading
    assert "geomean speedup 2.83x over 2 operators; fast_1 = 100%, fast_1.5 = 100%, " \
        "fast_2 = 100%" in text


def test_machine_table_names_the_cpu_and_its_isa() -> None:
    text = B.render(_data())
    assert "| ISA (from /proc/cpuinfo flags) | sse4_2 avx avx2 fma |" in text
    zen3 = "flags\t\t: fpu sse sse2 ssse3 sse4_1 sse4_2 avx f16c fma avx2 bmi2\n"
    xeon = "flags\t\t: sse4_2 avx avx2 fma avx512f avx512dq avx512bw avx512vl\n"
    assert S.cpu_isa(zen3) == "sse4_2 avx avx2 fma"
    assert S.cpu_isa(xeon) == "sse4_2 avx avx2 fma avx512f avx512bw avx512vl"
    assert S.cpu_isa("Features\t: fp asimd evtstrm sve\n") == "asimd sve"
    assert S.cpu_isa("processor : 0\n") == "unknown"
    assert S.cpu_isa() != ""  # this machine's, whatever it has
