"""The parent picks a duel's checked runs, the same for both kernels, and holds the
workers' reports to them (real workers, real processes).

Saving a checked run's outputs is part of its timed window, so the CPU-time cross-check
compares like with like only when both workers check the same runs: picked by each
worker on its own, a 3-run check could check every run of one kernel and one of the
other, and an honest kernel with large outputs was rejected for the copy's CPU time."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kernelcrew.kernels.kernelfile import load_kernel
from kernelcrew.kernels.spec import load_op
from kernelcrew.tools.backends.backend import get_backend
from kernelcrew.tools.config import BenchSettings
from kernelcrew.tools.judge.duel import duel
from kernelcrew.tools.judge.harness import Harness, case_key
from tests.adversarial.conftest import TINY

REPS = 6


def _saved_runs(out_dir: Path) -> dict[str, set[int]]:
    """Per case id: the timed runs whose outputs the worker saved, from its report."""
    out = {}
    for line in (out_dir / "progress.jsonl").read_text().splitlines():
        ev = json.loads(line)
        if ev.get("event") == "done":
            out[ev["case"]] = {t["run"] for t in ev["outputs"]["timed"]}
    return out


@pytest.fixture
def tiny():
    spec = load_op(TINY)
    be = get_backend("cpu")
    kf = load_kernel(spec.baseline_path("cpu"))
    comp = be.compile(kf, spec)
    assert comp.ok, comp.reason
    return spec, be, (comp, kf)


def test_both_workers_check_the_runs_the_parent_picked(tiny, monkeypatch):
    spec, be, k = tiny
    seen: list[dict[str, set[int]]] = []
    with Harness(spec, be, seed=1, bench=BenchSettings(reps=REPS, rounds=2, input_sets=2)) as h:
        collect = h.collect

        def reading(run, job, out_dir, kf, **kw):
            seen.append(_saved_runs(out_dir))  # before `collect` removes the scratch
            return collect(run, job, out_dir, kf, **kw)

        monkeypatch.setattr(h, "collect", reading)
        picks = set()
        for _ in range(3):
            seen.clear()
            d = duel(h, k, k)
            assert d.a.correct and d.b.correct, (d.a.outcome.reason, d.b.outcome.reason)
            a, b = seen
            assert a == b, "the two workers checked different runs"
            for c in h.cases:
                runs = a[f"{c.group}{c.index}"]
                assert {REPS - 2, REPS - 1} <= runs  # the last run of each input set
                assert len(runs) <= 2 + 1 + len(h.data(c).probes)
                picks.add((case_key(c), frozenset(runs)))
        # the random part is the parent's pick, drawn afresh per duel and case
        assert len(picks) > len(h.cases)


def test_a_report_without_a_run_the_parent_asked_for_is_rejected(tiny, monkeypatch):
    """The worker's report is the kernel's to change: one that leaves out a checked run's
    outputs (a wrong answer it would rather hide) is judged wrong."""
    spec, be, k = tiny
    with Harness(spec, be, seed=1, bench=BenchSettings(reps=4, rounds=1)) as h:
        collect = h.collect

        def tampered(run, job, out_dir, kf, **kw):
            if kw.get("checked") is not None and "run1" in str(out_dir):  # kernel a's worker
                path = out_dir / "progress.jsonl"
                lines = []
                for line in path.read_text().splitlines():
                    ev = json.loads(line)
                    if ev.get("event") == "done":
                        ev["outputs"]["timed"] = ev["outputs"]["timed"][1:]
                    lines.append(json.dumps(ev))
                path.write_text("\n".join(lines) + "\n")
            return collect(run, job, out_dir, kf, **kw)

        monkeypatch.setattr(h, "collect", tampered)
        d = duel(h, k, k)
    assert d.b.correct
    assert not d.a.correct
    assert any("lacks the outputs of timed runs" in r.detail and "(tampered report?)" in r.detail
               for r in d.a.rows), [r.detail for r in d.a.rows]
