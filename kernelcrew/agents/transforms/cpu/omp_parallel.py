"""Threads: `omp_parallel` puts `#pragma omp parallel for` on independent outer loops;
`omp_version` gives a `parallel for` the source already has a serial version. Either way
work below a threshold (OMP_MIN_WORK, a knob) runs the serial copy.

omp_parallel is legal on a countable loop (`for (i = a; i < b; ++i)`, the bounds fixed
before it) whose iterations may run in any order (`analysis.parallel.parallel_verdict`):
each writes its own elements (its subscripts are one-to-one in the loop's variable), reads
nothing another iteration writes, calls only pure functions, leaves the loop by no
`return`, `break` or `goto`, and updates no scalar declared outside it other than a
recognized reduction of a plain arithmetic local (+, *, max, min: each thread reduces into
its own copy, `reduction(op : s)`). Tiles count as the elements they own. Where the rows
are disjoint only for a large enough leading dimension (`c[i * ldc + j]`), the threaded
copy runs under that run-time test too. Refused on a function that is threaded already
(its pragma is kept, never stacked), a loop under another OpenMP pragma, a loop inside a
`collapse`d nest, and a helper called from inside a loop (threads go on the caller's loop).

omp_version is always legal where it applies (without its pragma the loop is the plain C
loop it was); refused when the loop uses OpenMP itself (omp_ calls, other constructs) or
its work is not known before it.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from kernelcrew.agents.transforms.analysis.common import (
    descendants,
    finish,
    guard_edit,
    mentions_var,
    model_of,
    reduction_clauses,
    statements,
)
from kernelcrew.agents.transforms.analysis.dependence import Verdict
from kernelcrew.agents.transforms.analysis.parallel import (
    DEFAULT_MIN_WORK,
    owned_loops,
    parallel_verdict,
    work_expr,
)
from kernelcrew.agents.transforms.kernel_files import (
    Outcome,
    called_in_loops,
    each_entry,
    entries,
)
from kernelcrew.agents.transforms.reasons import entry_models, first_reasons
from kernelcrew.agents.transforms.views import through_views
from kernelcrew.csource.affine import FunctionModel
from kernelcrew.csource.syntax import (
    Edit,
    Loop,
    Source,
    lead_start,
    pragma_text,
    pragmas_before,
    same,
    walk,
)
from kernelcrew.kernels.kernelfile import KernelFile

# pragmas that only hint the compiler about a loop: the threaded copy goes without them
_HINT = re.compile(r"(GCC\s+)?(unroll|nounroll|ivdep|novector)\b|clang\s+loop\b")


def _reduction_clause(s: Source, lp: Loop, v: Verdict) -> str:
    """`reduction(op : vars)` clauses for the loop's reductions that its own pragmas (an
    `omp simd reduction`, merged into the threaded construct) do not name already."""
    return reduction_clauses(v.reductions, [pragma_text(s, p) for p in pragmas_before(lp.node)])


def omp_parallel_outer(src: str, entry: str, *, min_work: int = DEFAULT_MIN_WORK,
                       knob: str | None = None) -> str | None:
    """`#pragma omp parallel for schedule(static)` on each independent outermost loop of
    `entry`. Consecutive top-level loops that are all independent share one `omp parallel`
    region, each with `omp for` (its implicit barrier keeps the passes in order).

    The parallel code is versioned: `if (work >= min_work) { parallel } else { serial }`,
    because even an OpenMP `if(false)` clause costs ~0.4 us per call in libgomp, which is
    as much as a tiny case takes in all. With `knob`, the threshold is that macro (defined
    to `min_work` when the build does not set it), so it can be tuned like any knob."""
    got = model_of(src, entry)
    if got is None:
        return None
    s, m = got
    if any(re.match(r"omp\s+(parallel|for)\b", pragma_text(s, n))
           for n in walk(m.body) if n.type == "preproc_call"):
        return None  # already threaded
    chosen: list[Loop] = []

    def threadable(lp: Loop) -> bool:
        return lp.canonical and _threaded_pragma(s, lp, "omp for") is not None and \
            parallel_verdict(m, lp, reductions=True, assume=True).ok

    for top in m.forest:
        if threadable(top):
            chosen.append(top)
            continue
        # a sequential outer loop: one level down
        for c in top.children:
            if threadable(c):
                chosen.append(c)
    if not chosen:
        return None
    groups: list[list[Loop]] = []
    run = _region_run(s, m, chosen)
    if run is not None and len(run) > 1:
        groups.append(run)
    groups += [[lp] for lp in chosen if run is None or lp not in run or len(run) < 2]
    threshold = knob or str(min_work)
    edits: list[Edit] = [_parallel_version(s, m, g, threshold) for g in groups]
    if knob and f"#define {knob}" not in s.text and any(
            f">= {knob}" in e.text for e in edits):
        edits.append(guard_edit(s, m, knob, min_work))
    return finish(s, edits)


def _threaded_pragma(s: Source, lp: Loop, construct: str, clause: str = "") -> str | None:
    """The pragma line of the threaded copy of `lp`, in place of the pragmas attached to it:
    g++ accepts no other pragma between an OpenMP one and its loop, so an `omp simd` on the
    loop makes the combined `.. for simd` construct (its clauses kept) and loop hints
    (unroll, ivdep) stay on the serial copy only. None when the loop carries another
    pragma (one the threaded copy could neither merge nor do without)."""
    simd = None
    for p in pragmas_before(lp.node):
        text = pragma_text(s, p)
        if simd is None and re.match(r"omp\s+simd\b", text):
            simd = re.sub(r"^omp\s+simd\b", "", text)
        elif not _HINT.match(text):
            return None
    if simd is None:
        return f"#pragma {construct}{clause} schedule(static)"
    return f"#pragma {construct} simd{clause}{simd} schedule(static)"


def _parallel_version(s: Source, m: FunctionModel, group: list[Loop], min_work: str) -> Edit:
    """One edit that replaces the loops of `group` (consecutive statements) by a threaded
    copy for large work and the same code, single-threaded, below the threshold. The
    pragmas attached to a loop move with it: the serial copy keeps them as they are, the
    threaded copy has them merged into its worksharing pragma."""
    first, last = group[0].node, group[-1].node
    start, end = lead_start(s, first), last.end_byte
    ind = s.indent_of(first)
    works = [work_expr(s, m, lp) for lp in group]
    # a region: the work of all its passes (a short clean-up pass may come first)
    terms = list(dict.fromkeys(works))
    if None in terms:
        work = None
    elif len(terms) == 1:
        work = terms[0]
    else:  # `int` sizes: the sum is taken in 64 bits
        work = " + ".join(w if re.fullmatch(r"[\w.]+", w) else f"({w})" for w in terms)
        work = f"(long long){work}"
    region = len(group) > 1
    construct = "omp for" if region else "omp parallel for"

    def copy(with_pragmas: bool, extra: str) -> str:
        text = s.data[start:end]
        for lp in sorted(group, key=lambda x: x.node.start_byte, reverse=True):
            if with_pragmas:
                at, to = lead_start(s, lp.node) - start, s.line_start(lp.node) - start
                clause = (" collapse(2)" if _collapsible(m, lp) else "") + _reduction_clause(
                    s, lp, parallel_verdict(m, lp, reductions=True, assume=True))
                line = f"{_threaded_pragma(s, lp, construct, clause)}\n"
                if _triangular(m, lp):  # rows of unequal work: dealt out one at a time
                    line = line.replace("schedule(static)", "schedule(static, 1)")
                text = text[:at] + line.encode() + text[to:]
        lines = text.decode().split("\n")
        return "\n".join(ln if not ln.strip() or ln.startswith("#") else extra + ln
                         for ln in lines)

    # what the threaded copy's legality rests on (leading dimensions), tested with the size
    conds = list(dict.fromkeys(c for lp in group
                               for c in parallel_verdict(m, lp, reductions=True,
                                                         assume=True).assume))
    if conds:
        test = " && ".join(f"({c})" for c in conds)
    if work is None and conds:
        st = "    "
        par = copy(True, st + (st if region else ""))
        ser = copy(False, st)
        if region:
            par = f"#pragma omp parallel\n{ind}{st}{{\n{par}\n{ind}{st}}}"
        return Edit(start, end, f"{ind}if ({test}) {{\n{par}\n{ind}}} else {{\n{ser}\n{ind}}}")
    if work is None:  # no size known before the loop: thread it unconditionally
        if region:
            return Edit(start, end, f"#pragma omp parallel\n{ind}{{\n{copy(True, '    ')}\n"
                                    f"{ind}}}")
        return Edit(start, end, copy(True, ""))
    st = "    "
    par = copy(True, st + (st if region else ""))
    ser = copy(False, st)
    if region:
        par = f"#pragma omp parallel\n{ind}{st}{{\n{par}\n{ind}{st}}}"
    cond = f"{work} >= {min_work}" + (f" && {test}" if conds else "")
    text = (f"{ind}if ({cond}) {{\n{par}\n{ind}}} else {{\n{ser}\n{ind}}}")
    return Edit(start, end, text)


def _triangular(m: FunctionModel, lp: Loop) -> bool:
    """A loop inside `lp` has a bound that moves with `lp`'s counter (`j = i; j < m`):
    the iterations have unequal work, so `schedule(static, 1)` deals them out in turn
    (contiguous blocks would give one thread most of a triangle)."""
    tiles = owned_loops(m, lp)  # a strip's own loops move with it but are not uneven
    return any(n is not None and mentions_var(m, n, lp)
               for c in descendants(lp) if c.key not in tiles for n in (c.start, c.end))


def _collapsible(m: FunctionModel, lp: Loop) -> bool:
    """A loop whose body is just the next loop (rectangular, independent too, no pragma of
    its own): threads share out the iterations of both, so a thin shape (B = 3 batches of
    T rows, one row of tiles) still keeps every thread busy."""
    stmts = statements(lp.body)
    if len(stmts) != 1 or len(lp.children) != 1:
        return False
    c = lp.children[0]
    if not same(stmts[0], c.node) or not c.canonical or pragmas_before(c.node):
        return False
    if lp.step is None and not c.children:
        return False  # an innermost loop is better left free for `omp simd`
    if any(n is not None and mentions_var(m, n, lp) for n in (c.start, c.end, c.step)):
        return False
    return parallel_verdict(m, c).ok


def _region_run(s: Source, m: FunctionModel, chosen: list[Loop]) -> list[Loop] | None:
    """The chosen top-level loops when they are consecutive statements of the function body
    (only comments and the loops' own pragmas between): they can share one parallel
    region."""
    tops = [lp for lp in chosen if lp.parent is None]
    if len(tops) < 2:
        return None
    own = [p for lp in tops for p in pragmas_before(lp.node)]
    stmts = [c for c in m.body.named_children
             if c.type != "comment" and not any(same(c, p) for p in own)]
    idx = [next((k for k, st in enumerate(stmts) if same(st, lp.node)), -1) for lp in tops]
    if -1 in idx or idx != list(range(idx[0], idx[0] + len(idx))):
        return None
    return tops


def version_threaded(src: str, entry: str, *, min_work: int = DEFAULT_MIN_WORK,
                     knob: str | None = None) -> str | None:
    """Extend a `#pragma omp parallel for` the source already has with a serial version:
    `if (work >= min_work) { the pragma and loop } else { the loop without it }`, so tiny
    shapes do not pay for starting threads. Dropping the pragma is always legal (the loop
    then runs as a plain C loop); refused when the loop uses OpenMP itself (omp_ calls,
    other omp constructs) or its work is not known before it."""
    got = model_of(src, entry)
    if got is None:
        return None
    s, m = got
    edits: list[Edit] = []
    threshold = knob or str(min_work)
    for lp in m.loops:
        prag = [p for p in pragmas_before(lp.node)
                if re.match(r"omp\s+parallel\s+for\b", pragma_text(s, p))]
        if len(prag) != 1 or lp.parent is not None and any(
                re.match(r"omp\b", pragma_text(s, p)) for p in pragmas_before(lp.parent.node)):
            continue
        if re.search(r"\bif\s*\(", pragma_text(s, prag[0])) or _versioned(s, lp, threshold):
            continue  # versioned already
        if any(n.type == "preproc_call" and re.match(r"omp\b(?!\s+simd\b)", pragma_text(s, n))
               for n in walk(lp.body)) or re.search(r"\bomp_\w+\s*\(", s.text_of(lp.body)):
            continue
        work = work_expr(s, m, lp)
        if work is None:
            continue
        start, end = lead_start(s, lp.node), lp.node.end_byte
        ind = s.indent_of(lp.node)
        par = s.data[start:end].decode()
        ser = s.data[s.line_start(lp.node):end].decode()
        edits.append(Edit(start, end, f"{ind}if ({work} >= {threshold}) {{\n{_shift(par)}\n"
                                      f"{ind}}} else {{\n{_shift(ser)}\n{ind}}}"))
    if knob and edits and f"#define {knob}" not in s.text:
        edits.append(guard_edit(s, m, knob, min_work))
    return finish(s, edits)


def _versioned(s: Source, lp: Loop, threshold: str) -> bool:
    """The loop sits in the threaded arm of an `if (work >= threshold)` version test."""
    p = lp.node.parent
    while p is not None and p.type != "function_definition":
        if p.type == "if_statement" and f">= {threshold}" in s.text_of(
                p.child_by_field_name("condition")):
            return True
        p = p.parent
    return False


def _shift(text: str, step: str = "    ") -> str:
    """Indent code lines one level (pragma lines stay where they are)."""
    return "\n".join(ln if not ln.strip() or ln.lstrip().startswith("#") else step + ln
                     for ln in text.split("\n"))


# ---------------------------------------------------------------- on a kernel file

def _threaded(kf: KernelFile, p: dict[str, Any], fn: Callable[..., str | None]
              ) -> Outcome | None:
    """`fn(src, entry, min_work=, knob=)` on every entry but the helpers called from
    inside a loop; the OMP_MIN_WORK knob's value goes to the front matter when the guard
    uses it."""
    knob = p.get("knob") or None
    value = int(kf.meta.knobs.get(knob, p["min_work"])) if knob else int(p["min_work"])
    inner = called_in_loops(kf.body, entries(kf)[1:])
    out = each_entry(kf, lambda s, e: None if e in inner else
                     fn(s, e, min_work=value, knob=knob))
    if out is not None and knob and f">= {knob}" in (out.body or ""):
        out.knobs = {knob: value}
    return out


def omp_parallel_in_file(kf: KernelFile, p: dict[str, Any]) -> Outcome | None:
    """The omp_parallel move on a kernel file (params: min_work, knob)."""
    return _threaded(kf, p, through_views(omp_parallel_outer))


def omp_version_in_file(kf: KernelFile, p: dict[str, Any]) -> Outcome | None:
    """The omp_version move on a kernel file (params: min_work, knob)."""
    return _threaded(kf, p, version_threaded)


def why_not(kf: KernelFile) -> str:
    """Why omp_parallel does not apply: a function threaded already, or each loop's
    dependence."""
    reasons = []
    for name, s, m in entry_models(kf):
        if any(re.match(r"omp\s+(parallel|for)\b", pragma_text(s, n))
               for n in walk(m.body) if n.type == "preproc_call"):
            reasons.append(f"{name}() is threaded already (its pragma is kept, never stacked)")
            continue
        for top in m.forest:
            v = parallel_verdict(m, top, reductions=True)
            if not v.ok:
                reasons.append(f"{name}(): {v.reason}")
    return first_reasons(reasons, "no loop to thread")
