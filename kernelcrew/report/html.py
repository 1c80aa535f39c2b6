"""report.html: one self-contained page (inline CSS and SVG, no scripts, nothing
fetched)."""

from __future__ import annotations

from html import escape
from typing import Any

from kernelcrew.report.build import Report, split_stop_reason
from kernelcrew.report.charts import (
    OUTCOME_COLORS,
    RoofData,
    roofline_chart,
    speedup_chart,
)
from kernelcrew.report.markdown import fmt_value
from kernelcrew.report.timeline import (
    best_through,
    build_timeline,
    candidates_in,
    iterations_done,
    observation_of,
    proposal_line,
    proposals_of,
)

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
.stop { margin: 4px 0; overflow-wrap: anywhere; }
details.considered { margin: 2px 0 0; color: var(--muted); }
details.considered summary { cursor: pointer; }
details.considered ul { columns: 2 420px; margin: 6px 0; padding-left: 20px; color: var(--fg);
                        font-size: 13px; }
details.considered li { break-inside: avoid; overflow-wrap: anywhere; }
"""


def _e(v: Any) -> str:
    return escape(fmt_value(v))


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
        # the moves a stop reason lists are in the header, folded
        text = split_stop_reason(str(e.get("summary", ""))).line
        parts.append(f'<div class="iter"><h3>{escape(str(e.get("node")))}</h3>'
                     f"{_step(e, text)}</div>")
    if not tl.finalize and rep.run.result:
        stop = split_stop_reason(str(rep.run.result.get("stop_reason"))).line
        parts.append(f'<div class="iter"><h3>Finished</h3><div class="step"><span class="node">'
                     f'finalize</span><span></span><span class="sum">stop: '
                     f'{escape(stop)}</span><span></span></div></div>')
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


def _considered_html(items: list[str]) -> str:
    """The moves a run that stopped with nothing left to try considered, folded."""
    if not items:
        return ""
    lis = "".join(f"<li>{escape(i)}</li>" for i in items)
    return (f'<details class="considered" id="moves-considered"><summary>the {len(items)} '
            f"moves considered: tried, applicable, or why not</summary><ul>{lis}</ul>"
            "</details>")


def render_html(rep: Report) -> str:
    run = rep.run
    facts = dict(rep.facts)
    roof = rep.roof
    roof_svg = roofline_chart(roof) if roof else roofline_chart(RoofData("", [], None, None, ""))
    roof_cap = (f"Peaks: {fmt_value(roof.peak_gbps)} GB/s, {fmt_value(roof.peak_gflops)} GFLOP/s "
                f"({roof.peaks_source}). Points: " + "; ".join(
                    f"{p.label} from {p.source}" for p in roof.points)) if roof else \
        "No roofline: the run has no profile and no final race yet."
    if roof and roof.peak_gbps and any(p.gbps > roof.peak_gbps for p in roof.points):
        roof_cap += (" A point above the bandwidth roof: the case's working set fits in a cache,"
                     " which is faster than the measured DRAM peak.")
    table = (run.result or {}).get("table") or []
    # the speedup and the stop reason have their own lines above the facts
    fact_html = "".join(f"<div><b>{escape(k)}</b>: {escape(v)}</div>" for k, v in rep.facts
                        if k not in ("best speedup", "stop reason"))
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
&middot; {escape(facts.get("date", ""))}</span></div>
<div class="stop" id="stop-reason"><b>stop:</b> {escape(facts.get("stop reason", ""))}</div>
{_considered_html(rep.considered)}
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
