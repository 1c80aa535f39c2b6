"""OpenMP pragmas as the moves read them: which constructs a node sits in, and which
clauses of a `parallel for` still mean the same on groups of its iterations."""

from __future__ import annotations

import re

from kernelcrew.csource.syntax import Loop, Node, Source, pragma_text, pragmas_before

# clauses of a `parallel for` on the jammed loop that mean the same on groups of its
# iterations (anything else, a reduction, private copies of other variables, collapse,
# ordered, refuses)
_KEPT_CLAUSES = re.compile(r"(schedule|num_threads|if|proc_bind|default)\s*\([^()]*\)")


_PRIVATE = re.compile(r"private\s*\(([^()]*)\)")


_REDUCTION = re.compile(r"reduction\s*\(\s*[^():]+:([^()]*)\)")


def reduced_names(s: Source, lp: Loop) -> set[str]:
    """The variables (arrays by their names) in the `reduction` clauses of the OpenMP
    pragmas on `lp`."""
    out: set[str] = set()
    for p in pragmas_before(lp.node):
        for r in _REDUCTION.finditer(pragma_text(s, p)):
            out |= {v.split("[")[0].strip() for v in r.group(1).split(",") if v.strip()}
    return out


def worksharing(s: Source, lp: Loop, *, reductions: bool = False) -> str | None:
    """The loop's own `omp parallel for` pragma, when it is one the jam keeps (see
    `_pragma_reason`), else None. `private` naming only the loop's own counter (llama2.c's
    `#pragma omp parallel for private(i)`) says what OpenMP does anyway, on the jammed
    loop as on the original. With `reductions`, `reduction` clauses are kept too: a
    reduction over groups of iterations is the same reduction (the caller checks that
    the jam keeps what its variables carry in order, `_carried`)."""
    ps = [pragma_text(s, p) for p in pragmas_before(lp.node)]
    omp = [t for t in ps if re.match(r"omp\b", t)]
    if len(omp) != 1:
        return None
    m = re.fullmatch(r"omp\s+parallel\s+for\b(.*)", omp[0])
    if m is None:
        return None
    rest = _PRIVATE.sub(lambda p: "" if {v.strip() for v in p.group(1).split(",")} == {lp.var}
                        else p.group(0), m.group(1))
    if reductions:
        rest = _REDUCTION.sub("", rest)
    if _KEPT_CLAUSES.sub("", rest).replace(",", "").strip():
        return None
    return omp[0]


def collapsed_worksharing(s: Source, lp: Loop) -> tuple[str, str] | None:
    """(the pragma without its `collapse(2)`, the pragma) when `lp` carries an `omp
    parallel for collapse(2)` whose other clauses `worksharing` would keep: the pragma for
    groups of `lp`'s iterations once the loop inside is no longer one a collapse takes.
    omp_parallel collapses every perfect nest it threads, so a matrix product it threaded
    arrives at the jams as `collapse(2)` over rows and outputs."""
    omp = [t for t in (pragma_text(s, p) for p in pragmas_before(lp.node))
           if re.match(r"omp\b", t)]
    collapse = re.compile(r"\s*\bcollapse\s*\(\s*2\s*\)")
    if len(omp) != 1 or not collapse.search(omp[0]):
        return None
    bare = collapse.sub("", omp[0], count=1)
    m = re.fullmatch(r"omp\s+parallel\s+for\b(.*)", bare)
    if m is None or _KEPT_CLAUSES.sub("", m.group(1)).replace(",", "").strip():
        return None
    return bare, omp[0]


def in_omp_construct(s: Source, node: Node) -> bool:
    """`node` sits inside an OpenMP construct (parallel region, worksharing loop, ...):
    a move that starts threads there would nest."""
    p = node
    while p is not None and p.type != "function_definition":
        if any(_OMP.match(pragma_text(s, q)) for q in pragmas_before(p)):
            return True
        p = p.parent
    return False


_OMP = re.compile(r"omp\s+(parallel|for|single|master|critical|task|sections|atomic)\b")
