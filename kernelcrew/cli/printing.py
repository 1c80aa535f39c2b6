"""What the commands print: plain tables on stdout, progress on stderr (only on a
terminal), and one JSON document with `--json`."""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from typing import Any

CACHE_NOTE = {"cold": "the last-level cache flushed before every timed run; bandwidth "
                      "against the DRAM triad",
              "warm": "the previous run's data left in the caches; bandwidth against the "
                      "cache-resident triad"}


def progress(msg: str) -> None:
    """A progress line on stderr, shown only on a terminal."""
    if sys.stderr.isatty():
        print(f"  .. {msg}", file=sys.stderr, flush=True)


def live(event: dict) -> None:
    """One line per node execution of a crew run, on a terminal."""
    if not sys.stderr.isatty():
        return
    who = f" {event['agent']}" if event.get("agent") else ""
    print(f"  [iter {event.get('iteration', 0)}] {event['node']}{who} "
          f"({event.get('duration_s', 0):.1f}s): {event.get('summary', '')[:140]}",
          file=sys.stderr, flush=True)


def print_json(obj: Any) -> None:
    print(json.dumps(obj, indent=2, default=str))


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """Columns padded to their widest cell; None shows as `-`."""
    def fmt(v: Any) -> str:
        if v is None:
            return "-"
        if isinstance(v, float):
            return f"{v:.4g}" if abs(v) < 1e4 else f"{v:.3e}"
        return str(v)

    cells = [[fmt(v) for v in r] for r in rows]
    widths = [max(len(h), *(len(r[i]) for r in cells)) if cells else len(h)
              for i, h in enumerate(headers)]
    line = "  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True))
    out = [line, "  ".join("-" * w for w in widths)]
    out += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in cells]
    return "\n".join(out)


def print_check(res: Any) -> None:
    """`kernelcrew check`: the per-case table, the compiler's resources, the verdict."""
    rows = [[r.group, r.case, r.median_ms, r.p10_ms, r.p90_ms, r.baseline_ms, r.speedup,
             r.max_abs_err, r.status] for r in res.rows]
    print(table(["group", "case", "median_ms", "p10_ms", "p90_ms", "baseline_ms", "speedup",
                 "max_abs_err", "status"], rows))
    if res.compile and res.compile.resources:
        print()
        print(table(["kernel", "registers", "spill_st_B", "spill_ld_B", "smem_B"],
                    [[k.kernel, k.registers, k.spill_stores_bytes, k.spill_loads_bytes,
                      k.shared_bytes] for k in res.compile.resources]))
    print()
    sp = f"{res.speedup:.2f}x" if res.speedup else "n/a"
    print(f"verdict: {res.verdict}  correct: {res.correct}  speedup: {sp}  ({res.reason})")
    if res.measured_noise is not None:
        caches = sorted(set(res.cache.values()))
        print(f"measured noise: ±{res.measured_noise:.1%} over {res.rounds} rounds; minimum "
              f"speedup {res.min_speedup:.0%}; cache: {'/'.join(caches) or 'n/a'}")
    print(f"sandbox: {res.sandbox}")


def print_profile(res: Any) -> None:
    """`kernelcrew profile`: the summary, the metrics, the bottleneck."""
    print(res.summary)
    print()
    rows = [[name, m.value, m.unit, m.reason[:70]] for name, m in res.metrics.items()
            if name != "device"]
    print(table(["metric", "value", "unit", "note"], rows))
    print()
    b = res.bottleneck
    print(f"bottleneck: {b.kind}{'' if b.measured else ' (inferred, not measured)'}: "
          f"{b.evidence}")
    print(f"case: {res.case}  kernel: {res.kernel}  source: {res.source}  "
          f"device: {res.metrics['device'].reason if 'device' in res.metrics else res.backend}")
    if res.cache:
        print(f"cache state: {res.cache} ({CACHE_NOTE[res.cache]})")


def print_result(result: dict) -> None:
    """`kernelcrew optimize`: the final race per case and the run's one-paragraph summary."""
    if not result.get("ran", True):
        print_compile_only(result)
        return
    rows = result.get("table", [])
    print(table(["group", "case", "baseline_ms", "best_ms", "speedup", "max_abs_err", "status"],
                [[r["group"], r["case"], r.get("baseline_ms"), r.get("median_ms"),
                  r.get("speedup"), r.get("max_abs_err"), r["status"]] for r in rows]))
    best = result.get("best", {})
    print()
    print(f"{result.get('op')} on {result.get('backend')}: best {best.get('speedup', 0):.2f}x over "
          f"the baseline ({best.get('verdict_vs_baseline')}), correct: {best.get('correct')}")
    print(f"  best kernel: {best.get('path')}  (by {best.get('author')}, {best.get('kind')}, "
          f"iteration {best.get('iteration')})")
    from kernelcrew.report.build import split_stop_reason

    stop = split_stop_reason(str(result.get("stop_reason")))
    print(f"  iterations: {result.get('iterations')}, evaluations: {result.get('evaluations')}, "
          f"stop: {stop.line}" + (" (`kernelcrew show RUN` lists them)" if stop.considered
                                  else ""))
    run_dir = result.get("run_dir", "")
    print(f"  run: {result.get('run_id')}  report: {run_dir}/report.md")


def print_compile_only(result: dict) -> None:
    """No device: the candidates and what the compiler says about them; no times."""
    cands = result.get("candidates", [])
    print(table(["kind", "author", "outcome", "evidence"],
                [[c["kind"], c["author"], c["outcome"], c["detail"][:160]] for c in cands]))
    print()
    print(f"{result.get('op')} on {result.get('backend')}: NOT RUN, {result.get('stop_reason')}")
    print(f"  {len([c for c in cands if c['outcome'] == 'not-run'])} candidate(s) compiled, "
          f"{result.get('compile_errors', 0)} compile error(s); no timings, no speedups")
    run_dir = result.get("run_dir", "")
    print(f"  run: {result.get('run_id')}  candidates: {run_dir}/candidates")


def print_runs(runs: list[dict]) -> None:
    print(table(["run", "operator", "backend", "status", "speedup", "iters", "date"],
                [[r["run_id"], r["operator"], r["backend"], r["status"],
                  f"{r['speedup']:.2f}x" if r["speedup"] else None, r["iterations"],
                  r["date"][:19].replace("T", " ")] for r in runs]))


def print_reflections(items: list[tuple[Any, float | None]], as_json: bool) -> None:
    """`kernelcrew memory list|search`: (reflection, score or None) pairs."""
    if as_json:
        print_json([{**r.model_dump(mode="json"), **({"score": s} if s is not None else {})}
                    for r, s in items])
        return
    print(table(["operator", "family", "backend", "change", "author", "outcome", "speedup",
                 "text"],
                [[r.operator, r.family, r.backend, r.change_kind, r.author, r.verdict,
                  r.speedup, r.text[:70]] for r, _ in items]))
