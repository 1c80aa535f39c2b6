"""A run's report as data: the facts, the regression table per shape case, the
roofline points and the diff from baseline to best, rebuilt from the run directory
alone (`build_report`). `markdown` and `html` render it; `write` writes both."""

from __future__ import annotations

import difflib
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kernelcrew.errors import InputError
from kernelcrew.kernels.formats import FORMATS
from kernelcrew.kernels.kernelfile import text_digest
from kernelcrew.kernels.spec import load_op
from kernelcrew.report.charts import (
    RoofData,
    RoofPoint,
)
from kernelcrew.report.timeline import (
    Run,
    SpeedupHistory,
    iterations_done,
    load_run,
    read_json,
    run_device,
    run_started,
    run_status,
    speedup_history,
)
from kernelcrew.tools.backends.peaks import CpuPeaks, peaks_path

CaseKey = tuple[str, str]  # (group, case label)


# ---------------------------------------------------------------- the regression table


@dataclass
class TableRow:
    """One kernel on one shape group."""

    candidate: str  # file name, or "baseline" / "best (final race)"
    iteration: int | None
    author: str
    outcome: str  # accepted, same, slower, rejected, compile-error, pending, ...
    group: str
    cases: int
    time_ms: float | None  # sum of the group's case medians
    speedup: float | None  # vs the baseline: geometric mean over the group's cases
    max_abs_err: float | None
    status: str  # pass | fail | pending

    @property
    def change(self) -> str:
        """Time change vs the baseline, negative is faster."""
        if not self.speedup:
            return "-"
        return f"{(1 / self.speedup - 1) * 100:+.1f}% ({self.speedup:.2f}x)"


def _geomean(xs: list[float]) -> float | None:
    xs = [x for x in xs if x and x > 0]
    return math.exp(sum(map(math.log, xs)) / len(xs)) if xs else None


def _group_rows(rows: list[dict], ratio: dict[CaseKey, float | None], time_key: str,
                **kw: Any) -> list[TableRow]:
    groups: dict[str, list[dict]] = {}
    for r in rows:
        groups.setdefault(r["group"], []).append(r)
    out = []
    for g, rs in groups.items():
        times = [r.get(time_key) for r in rs]
        statuses = {r.get("status") for r in rs}
        errs = [r["max_abs_err"] for r in rs if r.get("max_abs_err") is not None]
        ratios = [ratio.get((g, r["case"])) for r in rs]
        out.append(TableRow(
            group=g, cases=len(rs),
            time_ms=sum(times) if all(t is not None for t in times) else None,
            speedup=_geomean([x for x in ratios if x]) if all(ratios) else None,
            max_abs_err=max(errs) if errs else None,
            status="fail" if "fail" in statuses else "pending" if statuses - {"pass"} else "pass",
            **kw))
    return out


@dataclass
class Evals:
    """The cached evaluations of a run (evals/*.json), indexed by kernel digest."""

    verify: dict[str, dict] = field(default_factory=dict)
    race: dict[str, tuple[str, dict]] = field(default_factory=dict)  # challenger -> (incumbent,)
    final: dict[str, dict] = field(default_factory=dict)

    @classmethod
    def load(cls, run_dir: Path) -> Evals:
        ev = cls()
        for p in sorted((run_dir / "evals").glob("*.json")):
            data = read_json(p)
            if not isinstance(data, dict):
                continue
            kind, _, rest = p.stem.partition("-")
            if kind == "verify":
                ev.verify[rest] = data
            elif kind == "final":
                ev.final[rest] = data
            elif kind == "race" and "-vs-" in rest:
                challenger, incumbent = rest.split("-vs-", 1)
                ev.race.setdefault(challenger, (incumbent, data))
        return ev

    def ratio(self, digest: str, key: CaseKey, base: str, depth: int = 0) -> float | None:
        """Speedup of `digest` over the baseline on one case: its race against the best
        of its time, chained through that best's own race, down to the baseline."""
        if digest == base:
            return 1.0
        if digest not in self.race or depth > 64:
            return None
        incumbent, data = self.race[digest]
        row = next((r for r in data.get("rows", []) if (r["group"], r["case"]) == key), None)
        if not row or not row.get("speedup"):
            return None
        below = self.ratio(incumbent, key, base, depth + 1)
        return row["speedup"] * below if below else None


def _candidate_files(run: Run) -> list[Path]:
    folder = run.dir / "candidates"
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.iterdir() if p.suffix == run.suffix)


def _iteration_of(name: str) -> int | None:
    m = re.match(r"iter(\d+)-", name)
    return int(m.group(1)) if m else None


def _author_of(name: str) -> str:
    """The author from a candidate's file name: iterNN-K-AUTHOR-HHMMSS[.rN].ext"""
    m = re.match(r"iter\d+-\d+-(.+)-\d{6}(\.r\d+)?\.\w+$", name)
    return m.group(1) if m else "?"


def regression_rows(run: Run, history: SpeedupHistory, evals: Evals) -> list[TableRow]:
    """Baseline, the best (final race) and every candidate, per shape group."""
    base_text = _read(run.dir / f"baseline{run.suffix}")
    base = text_digest(base_text) if base_text is not None else ""
    out: list[TableRow] = []
    final_rows = (run.result or {}).get("table") or []
    if final_rows:
        ones = {(r["group"], r["case"]): 1.0 for r in final_rows}
        out += _group_rows(final_rows, ones, "baseline_ms", candidate="baseline", iteration=0,
                           author="baseline", outcome="baseline")
        best = run.result.get("best", {}) if run.result else {}
        ratio = {(r["group"], r["case"]): r.get("speedup") for r in final_rows}
        out += _group_rows(final_rows, ratio, "median_ms", candidate="best (final race)",
                           iteration=best.get("iteration"), author=str(best.get("author")),
                           outcome=str(best.get("verdict_vs_baseline")))
    tracks = {Path(c.path).name: c for c in history.candidates}
    for f in _candidate_files(run):
        track = tracks.get(f.name)
        text = _read(f) or ""
        digest = text_digest(text)
        kw = {"candidate": f.name, "iteration": track.iteration if track else _iteration_of(f.name),
              "author": track.author if track else _author_of(f.name),
              "outcome": track.outcome if track else "pending"}
        if digest in evals.race:
            rows = evals.race[digest][1].get("rows", [])
            ratio = {(r["group"], r["case"]): evals.ratio(digest, (r["group"], r["case"]), base)
                     for r in rows}
            out += _group_rows(rows, ratio, "median_ms", **kw)
        elif digest in evals.verify:
            out += _group_rows(evals.verify[digest].get("rows", []), {}, "median_ms", **kw)
        else:
            failed = kw["outcome"] == "compile-error" or (track and track.compile_ok is False)
            if failed:
                kw["outcome"] = "compile-error" + (" (revised)" if _revised(f) else "")
            out.append(TableRow(group="(all)", cases=0, time_ms=None, speedup=None,
                                max_abs_err=None, status="fail" if failed else "pending", **kw))
    return out


def _revised(f: Path) -> bool:
    stem = f.name[: -len(f.suffix)].split(".r")[0]
    return any(p.name.startswith(stem + ".r") for p in f.parent.iterdir() if p != f)


def _read(path: Path) -> str | None:
    try:
        return path.read_text()
    except OSError:
        return None


# ---------------------------------------------------------------- roofline


def _profiles(run: Run) -> list[tuple[int, dict]]:
    out = []
    for p in sorted((run.dir / "profiles").glob("iter*.json")):
        data = read_json(p)
        m = re.match(r"iter(\d+)", p.stem)
        if isinstance(data, dict) and m and data.get("roofline"):
            out.append((int(m.group(1)), data))
    return out


def _op_spec(run: Run) -> Any:
    for ref in ((run.result or {}).get("op"), run.context.get("operator")):
        if not ref:
            continue
        try:
            return load_op(ref)
        except InputError:
            continue
    return None


def _cached_peaks(backend: str) -> tuple[float | None, float | None, str]:
    """This machine's measured CPU peaks if they are already cached (never measured here),
    for a backend whose kernels run on this CPU (host code)."""
    fmt = FORMATS.get(backend)
    if fmt is None or fmt.code != "host":
        return None, None, "no profile with a roofline in this run"
    path = peaks_path()
    if not path.exists():
        return None, None, ("no profile with a roofline in this run, and this machine's peaks "
                            "are not measured yet (python -m kernelcrew.tools.backends.peaks)")
    try:
        pk = CpuPeaks.model_validate_json(path.read_text())
    except ValueError:
        return None, None, f"unreadable peaks cache {path}"
    return (max(pk.triad_gbps, pk.triad_1t_gbps), max(pk.fma_gflops, pk.fma_1t_gflops),
            "this machine's cached peaks (STREAM triad, FMA loop)")


def roofline_data(run: Run) -> RoofData | None:
    """Baseline and best on the roofline: from the first and the last profile when the last
    one profiled the best kernel, else from the final race's timings and the op's cost."""
    profs = _profiles(run)
    best_iter = int((run.result or {}).get("best", {}).get("iteration") or max(
        [int(e.get("iteration") or 0) for e in run.nodes("gate") if e.get("accepted")] or [0]))
    points: list[RoofPoint] = []
    case = ""
    bw = fl = None
    peaks_source = ""
    if profs:
        it0, p0 = profs[0]
        roof = p0["roofline"]
        case = str(p0.get("case", ""))
        bw, fl = roof.get("peak_gbps"), roof.get("peak_gflops")
        peaks_source = f"profile of iteration {it0}"
        if it0 <= 1:
            points.append(RoofPoint("baseline", roof["time_ms"], roof["bytes"], roof["flops"],
                                    f"profiles/iter{it0:02d}.json"))
        itn, pn = profs[-1]
        if itn > best_iter:  # profiled after the best was accepted: the best itself
            r = pn["roofline"]
            points.append(RoofPoint("best", r["time_ms"], r["bytes"], r["flops"],
                                    f"profiles/iter{itn:02d}.json"))
    table = (run.result or {}).get("table") or []
    have = {p.label for p in points}
    if table and have != {"baseline", "best"}:
        spec = _op_spec(run)
        m = re.match(r"(\w+)\[\d+\] (.*)", case)  # a profile's case: "typical[0] n=4096"
        group, label = m.groups() if m else ("", case)
        rows = [r for r in table if r.get("case") == label and r.get("group") in (group, "")]
        rows = rows or [r for r in table if r.get("case") == label] or sorted(
            (r for r in table if r.get("group") == "typical"),
            key=lambda r: _cost(spec, r)[0], reverse=True) or table
        row = rows[0]
        case = case or f"{row['group']} {row['case']}"
        nbytes, nflops = _cost(spec, row)
        if nbytes:
            if "baseline" not in have and row.get("baseline_ms"):
                points.insert(0, RoofPoint("baseline", row["baseline_ms"], nbytes, nflops,
                                           "final race in result.json"))
            if "best" not in have and row.get("median_ms"):
                points.append(RoofPoint("best", row["median_ms"], nbytes, nflops,
                                        "final race in result.json"))
    if not points:
        return None
    if bw is None and fl is None:
        bw, fl, peaks_source = _cached_peaks(run.backend)
    return RoofData(case=case, points=points, peak_gbps=bw, peak_gflops=fl,
                    peaks_source=peaks_source)


def _cost(spec: Any, row: dict) -> tuple[int, int]:
    if spec is None or not row.get("sizes"):
        return 0, 0
    return spec.cost_bytes(row["sizes"]), spec.cost_flops(row["sizes"])


# ---------------------------------------------------------------- the stop reason

CONSIDERED = "moves considered: "


@dataclass(frozen=True)
class StopReason:
    """Why the run stopped, in one line, and the moves it considered when it listed them
    (a run with nothing left to try lists every move of the catalogue: tried and how it
    went, applicable, or why not)."""

    line: str
    considered: list[str] = field(default_factory=list)


def split_stop_reason(text: str) -> StopReason:
    """The reason before `moves considered: ...`, and that list item by item (items are
    separated by `; ` outside parentheses)."""
    at = text.find(CONSIDERED)
    if at < 0:
        return StopReason(text)
    line = text[:at].rstrip("; ").strip()
    items, depth, start = [], 0, at + len(CONSIDERED)
    rest = text[start:]
    k = 0
    while k < len(rest):
        c = rest[k]
        depth += (c == "(") - (c == ")")
        if depth == 0 and rest.startswith("; ", k):
            items.append(rest[:k])
            rest, k = rest[k + 2:], 0
            continue
        k += 1
    items.append(rest)
    items = [i.strip() for i in items if i.strip()]
    summary = f"{len(items)} moves considered"
    return StopReason(f"{line}; {summary}" if line else summary, items)


# ---------------------------------------------------------------- the whole report


@dataclass
class Report:
    run: Run
    history: SpeedupHistory
    rows: list[TableRow]
    roof: RoofData | None
    diff: list[str]  # unified diff lines, baseline -> best
    facts: list[tuple[str, str]]  # header: (label, value); the stop reason in one line
    considered: list[str] = field(default_factory=list)  # the moves the stop reason listed


def build_report(run_dir: str | Path) -> Report:
    run = load_run(run_dir)
    history = speedup_history(run.events)
    evals = Evals.load(run.dir)
    base = _read(run.dir / f"baseline{run.suffix}") or ""
    best_text = _read(run.dir / f"best{run.suffix}") or ""
    diff = list(difflib.unified_diff(base.splitlines(), best_text.splitlines(),
                                     f"baseline{run.suffix}", f"best{run.suffix}", lineterm=""))
    res = run.result or {}
    best = res.get("best", {})
    sp = best.get("speedup") if res else (history.best_line[-1][1] if history.best_line else None)
    stop = split_stop_reason(str(res.get("stop_reason") or "(still running, or killed)"))
    facts = [("operator", run.op), ("backend", run.backend), ("device", run_device(run)),
             ("date", f"{run_started(run):%Y-%m-%d %H:%M %Z}"), ("status", run_status(run)),
             ("iterations", str(iterations_done(run))),
             ("stop reason", stop.line),
             ("best speedup", f"{sp:.2f}x" if sp else "n/a")]
    if res:
        facts += [("best kernel", (f"{Path(str(best.get('path'))).name} by {best.get('author')} "
                                  f"({best.get('kind')}, iteration {best.get('iteration')})")),
                  ("verdict", f"{best.get('verdict_vs_baseline')}: {best.get('reason')}"),
                  ("evaluations", (f"{res.get('evaluations')} ({res.get('compile_errors')} "
                                  "compile errors)"))]
        tokens = res.get("tokens") or {}
        if tokens:
            facts.append(("tokens", ", ".join(f"{k} {v}" for k, v in tokens.items())))
    facts.append(("run", f"{run.run_id} ({run.dir})"))
    return Report(run, history, regression_rows(run, history, evals), roofline_data(run),
                  diff, facts, stop.considered)
