"""`kernelcrew runs`, `show` and `report` on a real run; the report files themselves."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

from kernelcrew.trace import read_trace
from tests.conftest import kernelcrew


def test_runs_lists_the_run(crew_run):
    proc = kernelcrew("runs", "--json")
    assert proc.returncode == 0, proc.stderr
    runs = json.loads(proc.stdout)
    mine = next(r for r in runs if r["run_id"] == crew_run["run_id"])
    assert mine["operator"] == "vadd" and mine["backend"] == "cpu"
    assert mine["status"] == "finished" and mine["iterations"] == 2
    assert abs(mine["speedup"] - crew_run["best"]["speedup"]) < 1e-9
    text = kernelcrew("runs")
    assert text.returncode == 0 and crew_run["run_id"] in text.stdout


def test_show_prints_the_timeline(crew_run):
    for ref in (crew_run["run_id"], crew_run["run_dir"]):
        proc = kernelcrew("show", ref, env={"COLUMNS": "120"})
        assert proc.returncode == 0, proc.stderr
        out = proc.stdout
        assert out.startswith(f"run {crew_run['run_id']}: vadd on cpu, finished")
        assert "-- iteration 1:" in out and "-- iteration 2:" in out
        for node in ("baseline", "observe", "specialist", "coordinator", "execute", "verify",
                     "gate", "reflect", "finalize"):
            assert re.search(rf"^  {node} ", out, re.MULTILINE), f"no {node} line"
        spec_agents = {e["agent"] for e in read_trace(crew_run["run_dir"])
                       if e["node"] == "specialist"}
        for agent in spec_agents:
            assert agent in out


def test_show_json_groups_events_by_iteration(crew_run):
    proc = kernelcrew("show", crew_run["run_id"], "--json")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert [it["iteration"] for it in data["iterations"]] == [1, 2]
    assert all(len(it["gate"]) == 1 and len(it["observe"]) == 1 for it in data["iterations"])
    assert data["result"]["run_id"] == crew_run["run_id"]


def test_report_rebuilds_both_files(crew_run):
    run_dir = Path(crew_run["run_dir"])
    for name in ("report.md", "report.html"):
        assert (run_dir / name).exists(), f"finalize did not write {name}"
        (run_dir / name).unlink()
    proc = kernelcrew("report", crew_run["run_id"])
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == [str(run_dir / "report.md"), str(run_dir / "report.html")]
    md = (run_dir / "report.md").read_text()
    for section in ("## Regression table", "## Speedup per iteration", "## Roofline",
                    "## Timeline", "### Iteration 1", "### Iteration 2", "## Diff"):
        assert section in md, section


def test_report_html_is_self_contained(crew_run):
    html = (Path(crew_run["run_dir"]) / "report.html").read_text()
    assert "<script" not in html.lower() and "<link" not in html.lower()
    assert "@import" not in html and "url(" not in html and " src=" not in html
    urls = set(re.findall(r"https?://[^\s\"'<>)]+", html))
    assert urls <= {"http://www.w3.org/2000/svg"}, urls
    for element_id in ("regression-table", "speedup-chart", "roofline-chart", "timeline"):
        assert f'id="{element_id}"' in html


def test_report_diff_is_escaped_and_matches_the_files(crew_run):
    run_dir = Path(crew_run["run_dir"])
    html = (run_dir / "report.html").read_text()
    base, best = (run_dir / "baseline.cpp").read_text(), (run_dir / "best.cpp").read_text()
    if base == best:
        assert "no change was accepted" in html
    else:
        assert 'id="diff"' in html and "#include &lt;cstdint&gt;" in html
        assert "#include <cstdint>" not in html


def test_unknown_run_is_bad_input():
    proc = kernelcrew("show", "no-such-run")
    assert proc.returncode == 2 and "no run 'no-such-run'" in proc.stderr
    proc = kernelcrew("report", "no-such-run")
    assert proc.returncode == 2


def test_a_killed_run_still_lists_shows_and_reports(crew_run, tmp_path):
    """A run cut off mid-iteration (no result.json, a half-written last trace line)."""
    src = Path(crew_run["run_dir"])
    killed = tmp_path / "runs" / "killed"
    shutil.copytree(src, killed, ignore=shutil.ignore_patterns("report.*", "result.json"))
    lines = (src / "trace.jsonl").read_text().splitlines()
    observe2 = next(k for k, ln in enumerate(lines)
                    if json.loads(ln)["node"] == "observe" and json.loads(ln)["iteration"] == 2)
    (killed / "trace.jsonl").write_text("\n".join(lines[:observe2 + 1]) + '\n{"time": "20')
    proc = kernelcrew("runs", "--json", "--runs-dir", str(killed.parent))
    assert proc.returncode == 0, proc.stderr
    [row] = json.loads(proc.stdout)
    assert row["status"] == "running-or-killed" and row["iterations"] == 1
    proc = kernelcrew("show", str(killed))
    assert proc.returncode == 0, proc.stderr
    assert "-- iteration 2:" in proc.stdout and "no finalize event" in proc.stdout
    proc = kernelcrew("report", str(killed))
    assert proc.returncode == 0, proc.stderr
    html = (killed / "report.html").read_text()
    assert 'id="regression-table"' in html and "running-or-killed" in html
