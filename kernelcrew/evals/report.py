"""Run reports: report.md and a self-contained report.html (inline CSS and SVG, no
scripts, nothing fetched), rebuilt from the run directory alone.

`write_reports(run_dir)` is called by the finalize node and by `kernelcrew report RUN`.
"""

from __future__ import annotations

import difflib
import math
import re
from dataclasses import dataclass, field
from html import escape
from pathlib import Path
from typing import Any

from kernelcrew.errors import InputError
from kernelcrew.evals.charts import (
    OUTCOME_COLORS,
    RoofData,
    RoofPoint,
    roofline_chart,
    speedup_chart,
)
from kernelcrew.evals.timeline import (
    Iteration,
    Run,
    SpeedupHistory,
    best_through,
    build_timeline,
    candidates_in,
    iterations_done,
    load_run,
    observation_of,
    proposal_line,
    proposals_of,
    read_json,
    run_device,
    run_started,
    run_status,
    speedup_history,
)
from kernelcrew.graph.trace import write_text_atomic
from kernelcrew.kernels.kernelfile import text_digest

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
    from kernelcrew.kernels.spec import load_op

    for ref in ((run.result or {}).get("op"), run.context.get("operator")):
        if not ref:
            continue
        try:
            return load_op(ref)
        except InputError:
            continue
    return None


def _cached_peaks(backend: str) -> tuple[float | None, float | None, str]:
    """This machine's measured CPU peaks if they are already cached (never measured here)."""
    if backend != "cpu":
        return None, None, "no profile with a roofline in this run"
    try:
        from kernelcrew.tools.peaks import CpuPeaks, peaks_path
    except ImportError:
        return None, None, "no profile with a roofline in this run"
    path = peaks_path()
    if not path.exists():
        return None, None, ("no profile with a roofline in this run, and this machine's peaks "
                            "are not measured yet (python -m kernelcrew.tools.peaks)")
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


# ---------------------------------------------------------------- the whole report


@dataclass
class Report:
    run: Run
    history: SpeedupHistory
    rows: list[TableRow]
    roof: RoofData | None
    diff: list[str]  # unified diff lines, baseline -> best
    facts: list[tuple[str, str]]  # header: (label, value)


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
    facts = [("operator", run.op), ("backend", run.backend), ("device", run_device(run)),
             ("date", f"{run_started(run):%Y-%m-%d %H:%M %Z}"), ("status", run_status(run)),
             ("iterations", str(iterations_done(run))),
             ("stop reason", str(res.get("stop_reason") or "(still running, or killed)")),
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
                  diff, facts)


def write_reports(run_dir: str | Path) -> tuple[Path, Path]:
    """(Re)build report.md and report.html in the run directory; return their paths."""
    rep = build_report(run_dir)
    md, html = rep.run.dir / "report.md", rep.run.dir / "report.html"
    write_text_atomic(md, render_markdown(rep))
    write_text_atomic(html, render_html(rep))
    return md, html


# ---------------------------------------------------------------- markdown


def _fmt(v: Any, digits: int = 4) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.{digits}g}"
    return str(v)


def _md_cell(v: Any) -> str:
    return _fmt(v).replace("|", "\\|").replace("\n", " ")


def _md_table(headers: list[str], rows: list[list[Any]]) -> list[str]:
    out = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    out += ["| " + " | ".join(_md_cell(c) for c in r) + " |" for r in rows]
    return out


def _iteration_md(it: Iteration, run_dir: Path) -> list[str]:
    out = [f"### Iteration {it.number}", ""]
    for e in it.observe:
        out.append(f"- **observe**: {observation_of(e, run_dir)}")
    for e in it.specialists:
        props = proposals_of(e, run_dir) if e.get("node") == "specialist" else []
        lines = [proposal_line(d) for d in props] or [str(e.get("summary"))]
        out += [f"- **{e.get('node')} {e.get('agent')}**: {line}" for line in lines]
    for e in it.coordinator:
        out.append(f"- **coordinator**: {e.get('summary')}")
        out += [f"  - not taken: {why}" for why in e.get("rejected") or []]
    for e in it.work:
        out.append(f"- **{e.get('node')}** ({e.get('agent')}): {e.get('summary')}")
    for e in it.gate:
        out.append(f"- **gate**: {e.get('summary')}")
    for e in it.reflections:
        out.append(f"- **reflect** ({e.get('outcome')}): {e.get('summary')}")
    for e in it.other:
        out.append(f"- **{e.get('node')}**: {e.get('summary')}")
    return out + [""]


def render_markdown(rep: Report) -> str:
    run = rep.run
    out = [f"# kernelcrew run: {run.op} on {run.backend}", ""]
    out += [f"- **{k}**: {v}" for k, v in rep.facts] + [""]
    out += ["## Regression table", "",
            ("Time is the sum of the group's case medians; the change vs the baseline is the "
            "geometric mean over its cases, chained through the best each candidate raced."), ""]
    out += _md_table(["candidate", "iter", "author", "outcome", "group", "time_ms",
                      "change vs baseline", "max_abs_err", "status"],
                     [[r.candidate, r.iteration, r.author, r.outcome, r.group, r.time_ms,
                       r.change, r.max_abs_err, r.status] for r in rep.rows])
    table = (run.result or {}).get("table") or []
    if table:
        out += ["", "### Best vs baseline, per case (final race)", ""]
        out += _md_table(["group", "case", "baseline_ms", "best_ms", "p10_ms", "p90_ms",
                          "speedup", "max_abs_err", "status"],
                         [[r["group"], r["case"], r.get("baseline_ms"), r.get("median_ms"),
                           r.get("p10_ms"), r.get("p90_ms"), r.get("speedup"),
                           r.get("max_abs_err"), r.get("status")] for r in table])
    out += ["", "## Speedup per iteration", ""]
    out += _md_table(["iteration", "best so far", "candidates (speedup vs baseline, outcome)"],
                     [[it, f"{s:.2f}x", ", ".join(
                         f"{c.author} {_fmt(c.speedup, 3)} {c.outcome}"
                         for c in rep.history.candidates if c.iteration == it) or "-"]
                      for it, s in rep.history.best_line])
    if rep.roof:
        out += ["", f"## Roofline ({rep.roof.case})", "",
                (f"Peaks: {_fmt(rep.roof.peak_gbps)} GB/s, {_fmt(rep.roof.peak_gflops)} GFLOP/s "
                f"({rep.roof.peaks_source})."), ""]
        out += _md_table(["kernel", "time_ms", "GB/s", "GFLOP/s", "FLOP/byte", "from"],
                         [[p.label, p.time_ms, p.gbps, p.gflops, p.intensity, p.source]
                          for p in rep.roof.points])
    out += ["", "## Timeline", ""]
    tl = build_timeline(run.events)
    for e in tl.baseline:
        out += [f"- **baseline**: {e.get('summary')}", ""]
    for it in tl.iterations:
        out += _iteration_md(it, run.dir)
    for e in tl.finalize + tl.other:
        out += [f"- **{e.get('node')}**: {e.get('summary')}"]
    out += ["", "## Diff: baseline -> best", ""]
    out += ["```diff", *rep.diff, "```"] if rep.diff else [("The best kernel is the baseline: "
                                                           "no change was accepted.")]
    return "\n".join(out) + "\n"


# ---------------------------------------------------------------- HTML

_CSS = """
:root { --fg:#1f2328; --muted:#656d76; --line:#d0d7de; --bg:#f6f8fa; --ok:#1a7f37;
        --bad:#cf222e; --warn:#9a6700; }
* { box-sizing: border-box; }
body { font-family: -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; color: var(--fg);
       margin: 0 auto; max-width: 1360px; padding: 20px 28px 60px; font-size: 14px;
       line-height: 1.45; background: #fff; }
h1 { font-size: 24px; margin: 0 0 4px; } h2 { font-size: 19px; margin: 30px 0 10px;
     border-bottom: 1px solid var(--line); padding-bottom: 4px; }
h3 { font-size: 15px; margin: 18px 0 6px; }
.facts { display: grid; grid-template-columns: repeat(auto-fill, minmax(300px, 1fr));
         gap: 6px 20px; background: var(--bg); border: 1px solid var(--line);
         border-radius: 6px; padding: 12px 16px; margin: 12px 0; }
.facts div { overflow-wrap: anywhere; } .facts b { color: var(--muted); font-weight: 600; }
.big { font-size: 34px; font-weight: 700; color: var(--ok); margin-right: 10px; }
.charts { display: flex; flex-wrap: wrap; gap: 18px; }
figure { margin: 0; border: 1px solid var(--line); border-radius: 6px; padding: 6px;
         flex: 1 1 520px; max-width: 680px; }
figcaption { color: var(--muted); font-size: 12px; max-width: 640px; padding: 4px 6px; }
svg.chart { display: block; font-family: inherit; width: 100%; height: auto; }
svg .chart-title { font-size: 14px; font-weight: 600; fill: #1f2328; }
svg .axis-label { font-size: 12px; fill: #444; } svg .tick { font-size: 11px; fill: #555; }
svg .legend, svg .note, svg .point-label, svg .roof-label { font-size: 11px; fill: #333; }
svg .point-label { font-weight: 600; }
table { border-collapse: collapse; width: 100%; font-size: 13px; }
th, td { border: 1px solid var(--line); padding: 4px 8px; text-align: left;
         vertical-align: top; }
th { background: var(--bg); }
td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
tr.final td { background: #f0fff4; } tr.base td { background: #f6f8fa; }
.status { font-weight: 700; } .pass { color: var(--ok); } .fail { color: var(--bad); }
.pending { color: var(--warn); }
.outcome { display: inline-block; border-radius: 10px; padding: 0 8px; color: #fff;
           font-size: 12px; white-space: nowrap; }
td.cand { font-family: ui-monospace, "SFMono-Regular", Menlo, Consolas, monospace;
          font-size: 12px; }
.iter { border: 1px solid var(--line); border-radius: 6px; margin: 12px 0; padding: 0 14px 8px; }
.iter h3 { margin-top: 10px; }
.step { display: grid; grid-template-columns: 96px 150px 1fr 60px; gap: 8px; padding: 3px 0;
        border-top: 1px dashed #eaeef2; }
.step .node { font-weight: 600; } .step .agent { color: var(--muted); overflow-wrap: anywhere; }
.step .dur { color: var(--muted); text-align: right; font-variant-numeric: tabular-nums; }
.step .sum { overflow-wrap: anywhere; }
.step.bad .node { color: var(--bad); } .step.good .node { color: var(--ok); }
.rejected { color: var(--muted); font-size: 12px; margin: 2px 0 2px 254px; }
pre.diff { background: var(--bg); border: 1px solid var(--line); border-radius: 6px;
           padding: 10px; overflow-x: auto; font-size: 12px; line-height: 1.4; }
pre.diff span { display: block; white-space: pre; }
.add { background: #dafbe1; color: #116329; } .del { background: #ffebe9; color: #82071e; }
.hunk { color: #0550ae; background: #ddf4ff; } .meta { color: var(--muted); font-weight: 600; }
.muted { color: var(--muted); }
"""


def _e(v: Any) -> str:
    return escape(_fmt(v))


def _status(s: str) -> str:
    return f'<span class="status {escape(s)}">{escape(s)}</span>'


def _outcome(o: str) -> str:
    color = OUTCOME_COLORS.get(o.split(" ")[0], "#57606a")
    return f'<span class="outcome" style="background:{color}">{escape(o)}</span>'


def _table_html(rep: Report) -> str:
    head = ("<tr><th>candidate</th><th>iter</th><th>author</th><th>outcome</th><th>shape group"
            "</th><th>cases</th><th>time (ms)</th><th>change vs baseline</th><th>max abs error"
            "</th><th>status</th></tr>")
    body = []
    for k, r in enumerate(rep.rows):
        cls = ' class="base"' if r.candidate == "baseline" else \
            ' class="final"' if r.candidate.startswith("best") else ""
        head_cells = ""
        if not k or rep.rows[k - 1].candidate != r.candidate:  # one kernel: cells span groups
            span = 1
            while k + span < len(rep.rows) and rep.rows[k + span].candidate == r.candidate:
                span += 1
            rs = f' rowspan="{span}"' if span > 1 else ""
            head_cells = (f'<td{rs} class="cand">{escape(r.candidate).replace("-", "-<wbr>")}'
                          f"</td><td{rs} class=num>{_e(r.iteration)}</td><td{rs}>"
                          f'{escape(r.author).replace("+", "+<wbr>")}</td><td{rs}>'
                          f"{_outcome(r.outcome)}</td>")
        body.append(
            f"<tr{cls}>{head_cells}<td>{escape(r.group)}</td>"
            f"<td class=num>{r.cases}</td><td class=num>{_e(r.time_ms)}</td>"
            f"<td class=num>{escape(r.change)}</td><td class=num>{_e(r.max_abs_err)}</td>"
            f"<td>{_status(r.status)}</td></tr>")
    return (f'<table id="regression-table"><thead>{head}</thead><tbody>{"".join(body)}'
            "</tbody></table>")


def _case_table_html(table: list[dict]) -> str:
    head = "".join(f"<th>{h}</th>" for h in ("group", "case", "baseline (ms)", "best (ms)",
                                              "p10 (ms)", "p90 (ms)", "speedup", "max abs error",
                                              "status"))
    rows = "".join(
        f"<tr><td>{escape(r['group'])}</td><td>{escape(r['case'])}</td>"
        f"<td class=num>{_e(r.get('baseline_ms'))}</td><td class=num>{_e(r.get('median_ms'))}</td>"
        f"<td class=num>{_e(r.get('p10_ms'))}</td><td class=num>{_e(r.get('p90_ms'))}</td>"
        f"<td class=num>{_e(r.get('speedup'))}</td><td class=num>{_e(r.get('max_abs_err'))}</td>"
        f"<td>{_status(str(r.get('status')))}</td></tr>" for r in table)
    return f'<table id="case-table"><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>'


def _step(e: dict, text: str | None = None, first: bool = True) -> str:
    node = str(e.get("node"))
    agent = str(e.get("agent") or "")
    if agent in (node, "gate", "coordinator"):
        agent = ""
    if node == "reflect":
        agent = str(e.get("outcome") or "")
    bad = e.get("ok") is False or e.get("correct") is False or e.get("halted") or \
        e.get("outcome") in ("rejected", "compile-error") or e.get("verdict") == "rejected"
    good = e.get("accepted") or e.get("outcome") == "accepted" or e.get("verdict") == "faster"
    cls = " bad" if bad else " good" if good else ""
    tokens = sum(v for v in (e.get("tokens") or {}).values() if isinstance(v, int))
    tok = f' <span class="muted">[{tokens} tokens]</span>' if tokens else ""
    text = str(e.get("summary", "")) if text is None else text
    dur = f"{float(e.get('duration_s') or 0):.1f}s" if first else ""
    out = (f'<div class="step{cls}" data-node="{escape(node)}"><span class="node">'
           f'{escape(node)}</span><span class="agent">{escape(agent).replace("+", "+<wbr>")}'
           f'</span><span class="sum">{escape(text)}{tok if first else ""}</span>'
           f"<span class=dur>{dur}</span></div>")
    for why in e.get("rejected") or []:
        out += f'<div class="rejected">not taken: {escape(str(why))}</div>'
    return out


def _timeline_html(rep: Report) -> str:
    tl = build_timeline(rep.run.events)
    parts = ['<div id="timeline">']
    for e in tl.baseline:
        parts.append(f'<div class="iter" id="iter-0"><h3>Baseline</h3>{_step(e)}</div>')
    for it in tl.iterations:
        n = candidates_in(it, rep.history)
        bs = best_through(rep.history, it.number)
        parts.append(f'<div class="iter" id="iter-{it.number}"><h3>Iteration {it.number} '
                     f'<span class="muted">{n} candidate(s), best so far '
                     f'{f"{bs:.2f}x" if bs else "n/a"}</span></h3>')
        for e in it.observe:
            parts.append(_step(e, observation_of(e, rep.run.dir)))
        for e in it.specialists:
            props = proposals_of(e, rep.run.dir) if e.get("node") == "specialist" else []
            parts += [_step(e, proposal_line(d), first=not k) for k, d in enumerate(props)]
            if not props:
                parts.append(_step(e))
        for e in it.coordinator + it.work + it.gate + it.reflections + it.other:
            parts.append(_step(e))
        parts.append("</div>")
    for e in tl.other + tl.finalize:
        parts.append(f'<div class="iter"><h3>{escape(str(e.get("node")))}</h3>{_step(e)}</div>')
    if not tl.finalize and rep.run.result:
        parts.append(f'<div class="iter"><h3>Finished</h3><div class="step"><span class="node">'
                     f'finalize</span><span></span><span class="sum">stop: '
                     f'{escape(str(rep.run.result.get("stop_reason")))}</span><span></span>'
                     "</div></div>")
    parts.append("</div>")
    return "\n".join(parts)


def _diff_html(lines: list[str]) -> str:
    if not lines:
        return ('<p id="diff" class="muted">The best kernel is the baseline: no change was '
                "accepted.</p>")
    out = []
    for ln in lines:
        cls = "meta" if ln.startswith(("+++", "---")) else "add" if ln.startswith("+") else \
            "del" if ln.startswith("-") else "hunk" if ln.startswith("@@") else "ctx"
        out.append(f'<span class="{cls}">{escape(ln) or " "}</span>')
    return f'<pre class="diff" id="diff">{"".join(out)}</pre>'


def render_html(rep: Report) -> str:
    run = rep.run
    facts = dict(rep.facts)
    roof = rep.roof
    roof_svg = roofline_chart(roof) if roof else roofline_chart(RoofData("", [], None, None, ""))
    roof_cap = (f"Peaks: {_fmt(roof.peak_gbps)} GB/s, {_fmt(roof.peak_gflops)} GFLOP/s "
                f"({roof.peaks_source}). Points: " + "; ".join(
                    f"{p.label} from {p.source}" for p in roof.points)) if roof else \
        "No roofline: the run has no profile and no final race yet."
    if roof and roof.peak_gbps and any(p.gbps > roof.peak_gbps for p in roof.points):
        roof_cap += (" A point above the bandwidth roof: the case's working set fits in a cache,"
                     " which is faster than the measured DRAM peak.")
    table = (run.result or {}).get("table") or []
    fact_html = "".join(f"<div><b>{escape(k)}</b>: {escape(v)}</div>" for k, v in rep.facts
                        if k != "best speedup")
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>kernelcrew: {escape(run.op)} on {escape(run.backend)} ({escape(run.run_id)})</title>
<style>{_CSS}</style></head>
<body>
<header id="header">
<h1>kernelcrew run: {escape(run.op)} on {escape(run.backend)}</h1>
<div><span class="big" id="best-speedup">{escape(facts.get("best speedup", "n/a"))}</span>
<span class="muted">best speedup over the baseline &middot; {escape(facts.get("device", ""))}
&middot; {escape(facts.get("date", ""))} &middot; stop: {escape(facts.get("stop reason", ""))}
</span></div>
<div class="facts">{fact_html}</div>
</header>
<section class="charts">
<figure>{speedup_chart(rep.history, (run.result or {}).get("best", {}).get("speedup"),
                       iterations_done(run))}
<figcaption>Best-so-far after each iteration's gate (line) and every evaluated candidate
(points; crosses: rejected or did not compile), chained through the best each candidate raced.
The diamond is the final side-by-side race of the best against the baseline.</figcaption>
</figure>
<figure>{roof_svg}<figcaption>{escape(roof_cap)}</figcaption></figure>
</section>
<h2>Regression table</h2>
<p class="muted">Per kernel and shape group: time is the sum of the group's case medians; the
change vs the baseline is the geometric mean over its cases (negative is faster), chained
through the best each candidate raced; status is correctness on every case.</p>
{_table_html(rep)}
{"<h3>Best vs baseline, per case (final race)</h3>" + _case_table_html(table) if table else ""}
<h2>Timeline</h2>
{_timeline_html(rep)}
<h2>Diff: baseline &rarr; best</h2>
{_diff_html(rep.diff)}
</body></html>
"""
