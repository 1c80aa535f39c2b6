"""report.md: the run report as Markdown."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kernelcrew.report.build import Report, split_stop_reason
from kernelcrew.report.timeline import (
    Iteration,
    build_timeline,
    observation_of,
    proposal_line,
    proposals_of,
)

# ---------------------------------------------------------------- markdown


def fmt_value(v: Any, digits: int = 4) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.{digits}g}"
    return str(v)


def _md_cell(v: Any) -> str:
    return fmt_value(v).replace("|", "\\|").replace("\n", " ")


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


def _llm_md(res: dict) -> list[str]:
    """What the LLM agents answered, and the tokens and money they used (LLM runs only)."""
    answers = res.get("answers") or {}
    usage = res.get("usage_by_agent") or {}
    if not answers.get("total") and not usage:
        return []
    out = ["", "## LLM answers", ""]
    kinds = [k for k, v in answers.items() if k not in ("total", "seconds_per_call") and v]
    cands = {k: v for k, v in (res.get("candidates") or {}).items() if v}
    out.append(f"{answers.get('total', 0)} answers: "
               + (", ".join(f"{answers[k]} {k}" for k in kinds) or "none")
               + (f"; {answers['seconds_per_call']} s per call" if answers.get(
                   "seconds_per_call") else "")
               + ("; candidates: " + ", ".join(f"{v} {k}" for k, v in cands.items())
                  if cands else ""))
    out += ["", "## Tokens and cost", ""]
    rows = [[a, u["calls"], u["input_tokens"], u["output_tokens"], u["total_tokens"],
             u["cost_usd"] if res.get("cost_usd") is not None else None]
            for a, u in sorted(usage.items())]
    rows += [[f"iteration {i}", u["calls"], u["input_tokens"], u["output_tokens"],
              u["total_tokens"], u["cost_usd"] if res.get("cost_usd") is not None else None]
             for i, u in sorted((res.get("usage_by_iteration") or {}).items(),
                                key=lambda kv: int(kv[0]))]
    out += _md_table(["agent / iteration", "calls", "input", "output", "total", "cost_usd"],
                     rows)
    return out


def render_markdown(rep: Report) -> str:
    run = rep.run
    out = [f"# kernelcrew run: {run.op} on {run.backend}", ""]
    out += [f"- **{k}**: {v}" for k, v in rep.facts] + [""]
    if rep.considered:  # folded: on GitHub and in most Markdown viewers, one line
        out += [(f"<details><summary>The {len(rep.considered)} moves considered: tried, "
                "applicable, or why not</summary>"), ""]
        out += [f"- {item}" for item in rep.considered] + ["", "</details>", ""]
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
                         f"{c.author} {fmt_value(c.speedup, 3)} {c.outcome}"
                         for c in rep.history.candidates if c.iteration == it) or "-"]
                      for it, s in rep.history.best_line])
    if rep.roof:
        out += ["", f"## Roofline ({rep.roof.case})", "",
                (f"Peaks: {fmt_value(rep.roof.peak_gbps)} GB/s, {fmt_value(rep.roof.peak_gflops)} GFLOP/s "
                f"({rep.roof.peaks_source})."), ""]
        out += _md_table(["kernel", "time_ms", "GB/s", "GFLOP/s", "FLOP/byte", "from"],
                         [[p.label, p.time_ms, p.gbps, p.gflops, p.intensity, p.source]
                          for p in rep.roof.points])
    out += _llm_md(run.result or {})
    out += ["", "## Timeline", ""]
    tl = build_timeline(run.events)
    for e in tl.baseline:
        out += [f"- **baseline**: {e.get('summary')}", ""]
    for it in tl.iterations:
        out += _iteration_md(it, run.dir)
    for e in tl.finalize + tl.other:  # the moves a stop reason lists are in the header
        out += [f"- **{e.get('node')}**: {split_stop_reason(str(e.get('summary'))).line}"]
    out += ["", "## Diff: baseline -> best", ""]
    out += ["```diff", *rep.diff, "```"] if rep.diff else [("The best kernel is the baseline: "
                                                           "no change was accepted.")]
    return "\n".join(out) + "\n"
