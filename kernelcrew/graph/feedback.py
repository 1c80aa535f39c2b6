"""What an author is told about its candidate: built from structured fields only.

The judge's own words (`CaseRow.detail`, a race's or a verification's `reason`) say how it
found a problem (which probe, which cross-check, the noise band and the threshold); an
optimizer told that learns to pass the check instead of doing the work. So everything
here reads only the data fields: the output that failed, where its worst element is,
what the kernel wrote there and what the reference says, the kind of failure (`cause`),
per-group speedups and times. A failure the judge's own integrity checks found is named
as that and nothing more. Cases are named by their group and their place in it, with
what matters about their sizes (odd, not a multiple of a vector width), never by their
sizes: the benchmark's cases are the judge's.
"""

from __future__ import annotations

from typing import Any

from kernelcrew.agents.contract import VECTOR_WIDTHS
from kernelcrew.results import CompileResult

MAX_WRONG_CASES = 5  # failing cases quoted back to the author
COMPILE_LINES = 40  # lines of compiler output, from the first
INTEGRITY = "rejected by the judge's integrity checks"
CAUSES = {
    "wrong-values": "wrong values",
    "unwritten": "elements never written",
    "nan-inf": "NaN or Inf where the reference has a finite value (or the reverse)",
    "shape": "an output of the wrong shape",
    "modified-inputs": "an input array was written to (inputs are read-only)",
    "crash": "the kernel crashed",
    "timeout": "the kernel did not finish in time",
    "not-run": "not run",
}


def _get(row: Any, key: str) -> Any:
    return row.get(key) if isinstance(row, dict) else getattr(row, key, None)


def case_words(group: str, ordinal: int, sizes: dict[str, int]) -> str:
    """'boundary case 2 (n odd, not a multiple of 16)': the case by its place in its
    group and what its sizes are like, not by its sizes."""
    traits = []
    for k, v in (sizes or {}).items():
        if v == 1:
            traits.append(f"{k} = 1")
            continue
        bits = ["odd"] if v % 2 else []
        w = next((w for w in VECTOR_WIDTHS if v % w), None)
        if w is not None:
            bits.append(f"not a multiple of {w}")
        if bits:
            traits.append(f"{k} {' and '.join(bits)}")
    return f"{group} case {ordinal}" + (f" ({'; '.join(traits)})" if traits else "")


def _ordinals(rows: list[Any]) -> list[int]:
    seen: dict[str, int] = {}
    out = []
    for r in rows:
        g = _get(r, "group") or "?"
        seen[g] = seen.get(g, 0) + 1
        out.append(seen[g])
    return out


def _fmt(v: Any) -> str:
    return "n/a" if v is None else f"{v:.6g}"


def row_failure(row: Any) -> str:
    """One failing case, from its data fields."""
    cause = _get(row, "cause")
    if cause == "integrity":
        return INTEGRITY
    what = CAUSES.get(cause or "", "")
    out = _get(row, "output")
    idx = _get(row, "worst_index")
    parts = []
    if cause == "modified-inputs":
        parts.append(f"input {out} was written to (inputs are read-only)" if out else what)
    elif out is not None and idx is not None:
        at = f"{out}[{', '.join(str(i) for i in idx)}]"
        if _get(row, "got") is not None or _get(row, "want") is not None:
            parts.append(f"{what or 'wrong values'}: {at} is {_fmt(_get(row, 'got'))}, the "
                         f"reference says {_fmt(_get(row, 'want'))}")
        else:
            parts.append(f"{what or 'wrong values'} at {at}")
    elif what:
        parts.append(what)
    else:
        return "rejected by the judge's checks"
    if _get(row, "max_abs_err") is not None and cause in (None, "wrong-values"):
        parts.append(f"max abs err {_get(row, 'max_abs_err'):.3g}, max rel err "
                     f"{_fmt(_get(row, 'max_rel_err'))}")
    bad = _get(row, "failing_indices") or []
    if bad and cause != "modified-inputs":
        parts.append(f"failing indices {[list(i) for i in bad[:5]]}")
    return "; ".join(parts)


def integrity_failure(rows: list[Any]) -> bool:
    return any(_get(r, "cause") == "integrity" for r in rows if _get(r, "status") == "fail")


def wrong_result_feedback(rows: list[Any], tolerance: str) -> str:
    """The worst elements of a wrong candidate, per failing case: where (group, case,
    output, index), what it wrote, what the reference says, and the tolerance."""
    if integrity_failure(rows):
        return f"The candidate was {INTEGRITY}."
    lines = [f"Tolerance: {tolerance} (|got - want| <= atol + rtol*|want|)."]
    failing, unrun = _failing(rows)
    for r, k in failing[:MAX_WRONG_CASES]:
        lines.append(f"- {case_words(_get(r, 'group'), k, _get(r, 'sizes'))}: "
                     f"{row_failure(r)}")
    if not failing:
        lines.append("- it failed verification (no case result came back)")
    elif len(failing) > MAX_WRONG_CASES:
        lines.append(f"- ... and {len(failing) - MAX_WRONG_CASES} more failing case(s)")
    if failing and unrun:
        lines.append(f"- {unrun} other case(s) not run: checking stops at the first failure")
    return "\n".join(lines)


def _failing(rows: list[Any]) -> tuple[list[tuple[Any, int]], int]:
    """The failing cases with their ordinals in their groups, and how many cases were not
    run because checking stopped at an earlier failure (those say nothing of the kernel)."""
    failed = [(r, k) for r, k in zip(rows, _ordinals(rows), strict=True)
              if _get(r, "status") == "fail"]
    unrun = [f for f in failed if _get(f[0], "cause") == "not-run"]
    if len(unrun) == len(failed):
        return failed, 0
    return [f for f in failed if _get(f[0], "cause") != "not-run"], len(unrun)


def rejection_note(rows: list[Any]) -> str:
    """One line for the history: why a candidate was rejected, from its rows."""
    if integrity_failure(rows):
        return INTEGRITY
    failing, _ = _failing(rows)
    if not failing:
        return "failed verification"
    r, k = failing[0]
    more = f" (and {len(failing) - 1} more case(s))" if len(failing) > 1 else ""
    return f"{case_words(_get(r, 'group'), k, _get(r, 'sizes'))}: {row_failure(r)}{more}"


def group_times(rows: list[Any]) -> dict[str, tuple[float, float]]:
    """group -> (candidate ms, best ms), summed over the group's cases of a race."""
    out: dict[str, list[float]] = {}
    for r in rows:
        mine, theirs = _get(r, "median_ms"), _get(r, "baseline_ms")
        if mine is None or theirs is None:
            continue
        t = out.setdefault(_get(r, "group"), [0.0, 0.0])
        t[0] += mine
        t[1] += theirs
    return {g: (a, b) for g, (a, b) in out.items()}


def race_note(outcome: str, vs_best: float | None, groups: dict[str, float] | None) -> str:
    """One line for the history: a raced candidate's result, without the gate's band."""
    head = {"accepted": "accepted", "faster-not-best": "faster, but another candidate was "
            "faster still", "same": "no measurable difference", "slower": "slower",
            "declined": "faster, declined by a person"}.get(outcome, outcome)
    ratio = f" ({vs_best:.2f}x vs the best)" if vs_best else ""
    per = ", ".join(f"{g} {s:.2f}x" for g, s in (groups or {}).items() if s)
    return head + ratio + (f"; per group: {per}" if per else "")


def compile_feedback(comp: CompileResult, max_lines: int = COMPILE_LINES) -> str:
    """The compiler's errors as the author reads them: the first error first (later ones
    often follow from it), then the compiler's output from its start, cut at the end."""
    order = {"fatal": 0, "error": 1, "warning": 2, "note": 3}
    msgs = sorted(comp.messages, key=lambda m: order.get(m.kind, 4))[:12]
    head = "\n".join(f"line {m.line}: {m.kind}: {m.message}" for m in msgs)
    log = comp.log.splitlines()
    first = next((i for i, ln in enumerate(log) if "error" in ln.lower()), 0)
    start = max(0, first - 2)  # a line of context above the first error
    shown = log[start:start + max_lines]
    rest = len(log) - start - len(shown)
    tail = "\n".join(shown) + (f"\n... {rest} more lines omitted" if rest > 0 else "")
    return f"{comp.reason}\n{head}\n--- the compiler's output from its first error ---\n{tail}"


def compile_note(comp_feedback: str) -> str:
    """The first error line, for the history."""
    for ln in comp_feedback.splitlines()[1:]:
        if ": error:" in ln or ": fatal:" in ln:
            return ln.strip()[:200]
    return comp_feedback.splitlines()[0][:200] if comp_feedback else "did not compile"
