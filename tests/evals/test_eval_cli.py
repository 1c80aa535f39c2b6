"""`kernelcrew eval --json` end to end on one small op: the table's fields and fast_p."""

from __future__ import annotations

import json

import pytest

from tests.conftest import OPS, kernelcrew


@pytest.mark.slow  # a whole eval: about 19 s
def test_eval_json_table_and_fast_p(tmp_path) -> None:
    p = kernelcrew("eval", "--ops", str(OPS / "vadd"), "--budget", "1", "--reps", "3", "--json",
                   "--runs-dir", str(tmp_path / "runs"), timeout=240)
    assert p.returncode == 0, p.stderr[-2000:]
    doc = json.loads(p.stdout)  # one JSON document on stdout, nothing else
    assert set(doc) >= {"settings", "machine", "rows", "summary"}
    assert doc["settings"]["budget"] == 1 and doc["settings"]["memory"] == "off"
    assert doc["machine"]["cores"] >= 1 and doc["machine"]["compiler"]
    (row,) = doc["rows"]
    for key in ("op", "baseline_ms", "best_ms", "speedup", "roofline_share", "bound_ms",
                "correct", "evaluations", "wall_s", "tokens", "iterations", "run_dir"):
        assert key in row, key
    assert row["op"] == "vadd" and not row["error"]
    assert row["correct"] is True and row["iterations"] == 1
    assert row["baseline_ms"] > 0 and row["best_ms"] > 0 and row["speedup"] > 0
    assert row["bound_ms"] > 0 and row["roofline_share"] > 0
    assert row["evaluations"] >= 1 and row["wall_s"] > 0 and row["tokens"] == 0
    s = doc["summary"]
    assert s["operators"] == 1 and s["correct"] == 1
    assert s["geomean_speedup"] == row["speedup"]
    assert s["fast_p"] == {p: float(row["speedup"] >= float(p)) for p in ("1", "1.5", "2")}


def test_eval_rejects_a_bad_budget() -> None:
    p = kernelcrew("eval", "--ops", str(OPS / "vadd"), "--budget", "0", "--json")
    assert p.returncode == 2 and "budget" in p.stderr
