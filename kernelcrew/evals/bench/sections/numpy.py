"""Part 5a: NumPy's idiomatic expression of each operator (timed by part 1 right after each
crew run) next to the crew's best."""

from __future__ import annotations

from typing import Any

from kernelcrew.evals import suite as S
from kernelcrew.evals.bench.section import Section, fmt, status


def render(data: dict[str, Any]) -> list[str]:
    L: list[str] = []
    add = L.append
    _f = fmt
    suite: S.SuiteResult | None = data.get("suite")
    rows = {r.op: r for r in suite.rows} if suite else {}
    bo: S.OpRow | None = data.get("baseline_only")
    reps = suite.settings["reps"] if suite else "-"
    add("## 5. Peers, side by side\n")
    add("### 5a. NumPy\n")
    add("NumPy's idiomatic expression of each operator, timed in its own process right "
        "after the crew's run on that operator (3 warm-up "
        f"calls, then {reps} timed calls alternating two input sets, "
        "perf_counter around each call, median), BLAS/OpenMP threads = the kernels' thread "
        "count, in the kernels' cache state: on a case whose timed kernel calls follow a "
        "flush of the last-level cache (two input sets that do not fit in half of it), each "
        "timed NumPy call follows the same flush, outside the clock (*cache* column: the "
        "cases' states; *back to back* is the same NumPy code called without the flush, "
        "from a warmer cache than the kernels are timed in). NumPy allocates its result on every call, as idiomatic code does. Where two "
        "spellings are natural both were timed and the faster is the peer. The crew's times "
        "are the medians of its best kernel from part 1 (its own sandboxed worker: fresh "
        "NaN-poisoned outputs per call, outputs re-checked). Each NumPy result was checked "
        "against the op's float64 reference.\n")
    np_rows = []
    for op, npr in data.get("numpy", {}).items():
        r = rows.get(op) or (bo if bo and bo.op == op else None)
        if npr.error:
            np_rows.append([op, npr.error, "-", "-", "-", "-", "-"])
            continue
        crew = r.best_ms if r else None
        states = sorted({c.cache for c in npr.cases}) or ["-"]
        cold = "cold" in states
        np_rows.append([op, f"`{npr.expression}`", "/".join(states),
                        _f(npr.typical_ms, "{:.4g}"),
                        _f(npr.no_flush_ms, "{:.4g}") if cold else "-", _f(crew, "{:.4g}"),
                        _f(npr.typical_ms / crew if crew else None, "{:.2f}x")])
    add(S.markdown_table(["operator", "NumPy expression", "cache", "NumPy ms",
                          "back to back ms", "crew ms", "crew faster by"], np_rows))
    add("")
    return L


def goals(data: dict[str, Any]) -> list[list[str]]:
    suite: S.SuiteResult | None = data.get("suite")
    nps = data.get("numpy", {})
    if not suite or not nps:
        return []
    beaten, lost = [], []
    for op, npr in nps.items():
        r = next((x for x in suite.rows if x.op == op), None)
        if r is None:
            continue
        if npr.typical_ms and r.best_ms and r.correct:
            (beaten if r.best_ms < npr.typical_ms else lost).append(
                (op, npr.typical_ms / r.best_ms))
        else:
            lost.append((op, None))
    n = len(beaten) + len(lost)
    return [["crew's best beats NumPy on every library op (8)", f"{n} of {n}",
             f"{len(beaten)} of {n}",
             status(not lost, "; ".join(f"{op}: crew at {fmt(x, '{:.2f}')}x NumPy's speed"
                                        for op, x in lost))]]


SECTION = Section("numpy", render, None, goals, needs=("suite",))
