"""Row sweeps: an outer loop over the rows of one or more matrices whose body runs several
inner loops over the same columns, with plain statements between them:

    for (i = 0; i < m; i++) {
        tmp_acc = 0;                                    // set-up
        for (j = 0; j < n; j++) tmp_acc += A[i][j] * x[j];       // a dot product
        tmp[i] = tmp_acc;                               // wrap-up
        for (j = 0; j < n; j++) y[j] += A[i][j] * tmp[i];        // the row added into y
    }

or one inner loop that both reduces and adds the row into a vector (`s[j] += r[i] *
A[i][j]; q_acc += A[i][j] * p[j];`), or two dot products per row (`tmp_acc += A[i][j] *
x[j]; y_acc += B[i][j] * x[j];`).

`sweep_plan` says whether U iterations of the outer loop may share each pass of its inner
loops (the legality `jam_sweeps` rests on). Jammed, the body's segments run in order, each
for the U rows: a run of plain statements as U copies (copy by copy), an inner loop as one
loop whose body holds the U copies of its body. Iterations of the outer loop are moved
past one another, so they must be independent (`check_loop`), but for arrays that one
inner loop alone touches, at one offset that does not change with the outer loop (`y[j]`
above): the jammed loop applies the U rows' updates of each element in the order of the
rows, as the original did. A scalar declared outside the loop that it writes, a
statement with a call that is not pure or control flow, an inner loop whose range changes
with the outer variable or that nests another loop, or an OpenMP pragma the jammed loop
cannot keep, refuses it."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from kernelcrew.agents.transforms.analysis.common import (
    invariant_text,
    mentions_var,
    statements,
)
from kernelcrew.agents.transforms.analysis.dependence import assign_target, check_loop
from kernelcrew.agents.transforms.analysis.dot_nests import (
    jam_pragma_reason,
    plain_statement,
    unit_or_invariant,
)
from kernelcrew.csource.affine import FunctionModel, split_terms
from kernelcrew.csource.syntax import (
    Loop,
    Node,
    declarators,
    lookup,
    pragma_text,
    pragmas_before,
    walk,
)

_HINTS = re.compile(r"^(omp\s+simd\b|GCC\s+(unroll|ivdep)\b|unroll\b)")


@dataclass
class SweepPlan:
    """What the jam of one row sweep needs."""

    segments: list[Node | Loop] = field(default_factory=list)  # plain statements and loops
    kept: set[str] = field(default_factory=set)  # Decl keys of the arrays kept in order
    reductions: dict[int, list[str]] = field(default_factory=dict)  # loop start -> sums
    locals_: set[str] = field(default_factory=set)  # Decl keys renamed per copy


def _kept_arrays(m: FunctionModel, lp: Loop, inner: list[Loop]) -> set[str] | str:
    """Arrays written in `lp` whose every access sits in one inner loop, at one offset
    free of `lp`'s variable (Decl keys); a reason when an array written in `lp` is
    neither one of those nor written one element per row."""
    arrays: dict[str, list[tuple[Node, object]]] = {}
    for n in walk(lp.body):
        if n.type == "subscript_expression":
            acc = m.subscript(n, lp.node)
            if acc is not None:
                arrays.setdefault(acc[0], []).append((n, acc[1]))
    kept: set[str] = set()
    for root, uses in arrays.items():
        written = any((t := assign_target(u.parent)) is not None and
                      t.start_byte == u.start_byte and t.end_byte == u.end_byte
                      for u, _ in uses)
        if not written:
            continue
        homes = {next((k for k, il in enumerate(inner) if il.node.start_byte <= u.start_byte
                       < il.node.end_byte), -1) for u, _ in uses}
        offs = [off for _, off in uses]
        sp = split_terms(offs[0]) if offs[0] is not None else None
        if len(homes) == 1 and -1 not in homes and sp is not None and \
                lp.key not in sp[0] and all(o == offs[0] for o in offs):
            kept.add(root)
    return kept


def sweep_plan(m: FunctionModel, lp: Loop) -> SweepPlan | str:
    """The plan for jamming the row sweep `lp`, or why it cannot be jammed."""
    # stays long: the checks in the order their reasons are given, each on what the one
    # before it found
    s = m.src
    line = s.line_of(lp.node)
    if not lp.canonical or lp.step is not None:
        return f"loop at line {line} is not a unit-step countable loop"
    if not lp.children or any(c.children for c in lp.children):
        return f"loop at line {line} does not hold only innermost loops"
    stmts = statements(lp.body)
    inner = list(lp.children)
    starts = {il.node.start_byte for il in inner}
    segments: list[Node | Loop] = []
    for st in stmts:
        if st.start_byte in starts:
            segments.append(next(il for il in inner if il.node.start_byte == st.start_byte))
        elif st.type == "preproc_call":
            if not _HINTS.match(pragma_text(s, st)):
                return f"line {s.line_of(st)}: a pragma the jam cannot copy"
        elif not plain_statement(m, st):
            return (f"the body of the loop at line {line} has a statement other than plain "
                    f"statements and innermost loops (line {s.line_of(st)})")
        else:
            segments.append(st)
    if len([x for x in segments if isinstance(x, Loop)]) != len(inner):
        return f"an inner loop of the loop at line {line} is nested in a block"
    for il in inner:
        il_line = s.line_of(il.node)
        if not il.canonical:
            return f"inner loop at line {il_line} is not countable"
        for n in (il.start, il.end, il.step):
            if n is not None and (mentions_var(m, n, lp) or
                                  invariant_text(s, m, n, lp.node) is None):
                return f"the bounds of the inner loop at line {il_line} change with {lp.var}"
        if any(not _HINTS.match(pragma_text(s, p)) for p in pragmas_before(il.node)):
            return f"the inner loop at line {il_line} carries a pragma the jam cannot copy"
    plan = SweepPlan(segments=segments)
    v = check_loop(m, lp, allow_reductions=False)
    if not v.ok:
        kept = _kept_arrays(m, lp, inner)
        if isinstance(kept, str):
            return kept
        v2 = check_loop(m, lp, allow_reductions=False, exclude=frozenset(kept))
        if not kept or not v2.ok:
            return f"iterations of {lp.var} are not independent: {v.reason}"
        plan.kept = kept
    # a scalar declared outside the loop and written in it links the rows
    for n in walk(lp.body):
        t = assign_target(n)
        if t is not None and t.type == "identifier":
            d = lookup(t.text.decode(), t)
            if d is not None and not (lp.node.start_byte <= d.node.start_byte
                                      < lp.node.end_byte):
                return f"{t.text.decode()} is declared outside the loop at line {line} and " \
                       "written in it"
    carried = {k.split("@")[0] for k in plan.kept}
    why = jam_pragma_reason(s, lp, carried)
    if why:
        return f"loop at line {line} {why}"
    for il in inner:
        vi = check_loop(m, il, allow_reductions=True)
        if not vi.ok:
            return f"the inner loop at line {s.line_of(il.node)} is not independent " \
                   f"apart from sums ({vi.reason})"
        if any(op != "+" for op in vi.reductions.values()) or vi.rewrites:
            return f"the inner loop at line {s.line_of(il.node)} reduces other than by sums"
        for name in vi.reductions:
            d = lookup(name, il.node)
            if d is None or not (lp.body.start_byte <= d.node.start_byte < lp.body.end_byte):
                return f"{name}, summed at line {s.line_of(il.node)}, is not a local of a row"
        plan.reductions[il.node.start_byte] = sorted(vi.reductions)
        # not a legality condition but the gain: a strided read would be gathered for
        # every copy, where interchanging the nest first makes it contiguous
        bad = unit_or_invariant(m, il)
        if bad is not None:
            return f"{bad} is strided in {il.var}: the jammed loop would gather"
    if invariant_text(s, m, lp.end, lp.node) is None:
        return f"the bound of {lp.var} is not fixed before the loop"
    skip = {il.decl.start_byte for il in inner if il.decl is not None}
    for n in walk(lp.body):
        if n.type == "declaration" and n.start_byte not in skip:
            for name, _, _, _ in declarators(n):
                plan.locals_.add(f"{name}@{n.start_byte}")
    return plan
