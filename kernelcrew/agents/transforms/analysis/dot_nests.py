"""Dot-product nests: when the outputs of an outer loop may share one pass of its inner
reduction (the legality that `unroll_and_jam` and `register_tile` both rest on)."""

from __future__ import annotations

import re

from kernelcrew.agents.transforms.analysis.common import invariant_text, mentions_var, statements
from kernelcrew.agents.transforms.analysis.dependence import (
    PURE_CALLS,
    assign_target,
    check_loop,
    defined_functions,
)
from kernelcrew.agents.transforms.analysis.openmp import reduced_names, worksharing
from kernelcrew.csource.affine import FunctionModel, split_terms
from kernelcrew.csource.syntax import Loop, Node, Source, lookup, pragma_text, pragmas_before, walk


def unit_or_invariant(m: FunctionModel, lp: Loop) -> str | None:
    """None when every subscript in the loop is unit-stride or invariant in its variable,
    else the first offending access."""
    for n in walk(lp.body):
        if n.type != "subscript_expression":
            continue
        acc = m.subscript(n, lp.node)
        if acc is None or acc[1] is None:
            return m.src.text_of(n)
        sp = split_terms(acc[1])
        if sp is None:
            return m.src.text_of(n)
        coef = sp[0].get(lp.key)
        if coef is not None and coef != {(): 1}:
            return m.src.text_of(n)
    return None


def plain_statement(m: FunctionModel, stmt: Node) -> bool:
    """A set-up or wrap-up statement: no loop, no control flow, only pure calls."""
    defined = defined_functions(m.src)
    for n in walk(stmt):
        if n.type in ("for_statement", "while_statement", "do_statement", "return_statement",
                      "break_statement", "continue_statement", "goto_statement",
                      "preproc_call"):
            return False
        if n.type == "call_expression":
            name = m.src.text_of(n.child_by_field_name("function")).replace("std::", "").strip()
            if name not in PURE_CALLS or name in defined:
                return False
    return True


def jam_reason(m: FunctionModel, lp: Loop) -> str | None:
    """Why the loop `lp` cannot be jammed (None: it can)."""
    s = m.src
    line = s.line_of(lp.node)
    # the shape: a unit-step counted loop around exactly one innermost loop, the rest of
    # its body plain statements (the set-up before, the wrap-up after), so that copies of
    # the set-up, one pass of the inner loop and copies of the wrap-up say all it does
    if not lp.canonical or lp.step is not None:
        return f"loop at line {line} is not a unit-step countable loop"
    if len(lp.children) != 1 or lp.children[0].children:
        return f"loop at line {line} does not hold exactly one innermost loop"
    inner = lp.children[0]
    stmts = statements(lp.body)
    if not any(st.start_byte == inner.node.start_byte for st in stmts):
        return f"the inner loop at line {s.line_of(inner.node)} is nested in a block"
    others = [st for st in stmts if st.start_byte != inner.node.start_byte
              and st.type != "preproc_call"]
    if not all(plain_statement(m, st) for st in others):
        return f"the body of the loop at line {line} has statements other than set-up and " \
               "wrap-up around the inner loop"
    if not inner.canonical:
        return f"inner loop at line {s.line_of(inner.node)} is not countable"
    # one pass of the inner loop serves every jammed copy only if it runs over the same
    # range for each of them
    for n in (inner.start, inner.end, inner.step):
        if n is not None and (mentions_var(m, n, lp) or
                              invariant_text(s, m, n, lp.node) is None):
            return f"the inner loop's bounds change with {lp.var}"
    # the outer iterations are reordered (U of them interleaved): they must be independent,
    # or linked only by what the jam keeps in order (`_carried`)
    v = check_loop(m, lp, allow_reductions=False)
    same: set[str] = set()  # arrays the inner loop updates element-wise (y[j] += ...)
    carried: set[str] = set()
    if not v.ok:
        why, same = _carried(m, lp, inner)
        if why is not None:
            return f"iterations of {lp.var} are not independent: {v.reason}" + (
                f" ({why})" if why else "")
        carried = _carried_names(m, lp, inner, same)
    # an OpenMP pragma on the loop must still mean the same on groups of iterations
    why = _pragma_reason(s, lp, carried)
    if why:
        return f"loop at line {line} {why}"
    # the inner loop becomes one `omp simd` loop for all the copies: it must be a sum
    # reduction (each copy gets its own accumulator) or an element-wise update of arrays
    # (each element gets the copies' terms in order), not both, nothing else
    vi = check_loop(m, inner, allow_reductions=True)
    if not vi.ok or not (vi.reductions or same):
        return f"the inner loop at line {s.line_of(inner.node)} is not a reduction" + (
            " and updates no array element-wise" if vi.ok and not same else "") + (
            f" ({vi.reason})" if vi.reason else "")
    if same and vi.reductions:
        return f"the inner loop at line {s.line_of(inner.node)} both reduces and updates " \
               "an array"
    if any(op != "+" for op in vi.reductions.values()):
        return "the inner reduction is not a sum"
    # not a legality condition but the gain: a strided read would be gathered for every
    # copy, where interchanging the nest first makes it contiguous
    bad = unit_or_invariant(m, inner)
    if bad is not None:
        return f"{bad} is strided in {inner.var}: the jammed loop would gather (interchange " \
               "first)"
    # the group loop's limit is computed once before it
    if invariant_text(s, m, lp.end, lp.node) is None:
        return f"the bound of {lp.var} is not fixed before the loop"
    return None


def _carried(m: FunctionModel, lp: Loop, inner: Loop) -> tuple[str | None, set[str]]:
    """Whether the jam may reorder iterations of `lp` that are not independent: (None,
    the arrays updated element-wise) when what links them is only

    - scalars declared outside the loop that its set-up alone, or its wrap-up alone,
      mentions (a running maximum of the scores after each dot product, `denom += p`
      before each row is added): the jam runs the copies' set-ups one after the other
      in the original order, then their inner loops, then their wrap-ups, so each such
      scalar sees the same values in the same order;
    - arrays that only the inner loop touches, every access at one subscript that does
      not change with the outer loop (`y[j] += a[i * n + j] * x[i]`, the rows of a
      matrix added into one vector): iteration (i, j) meets only iterations (i', j) of
      the same j, and the jammed inner loop applies the copies' updates of y[j] in the
      original order of i.

    Else (why, set()): "" when neither explains it. A worksharing pragma on the loop with
    a carried scalar or array is left alone (the source would race)."""
    post_start, pre_end = inner.node.end_byte, inner.node.start_byte

    # a carried scalar mentioned on one side of the inner loop only: the copies of that
    # side run one after the other in the original order, so it sees the same sequence
    scalars = _outer_scalars(lp, inner)
    for name, key in scalars.items():
        where = set()
        for n in walk(lp.body):
            if n.type == "identifier" and n.text.decode() == name:
                d = lookup(name, n)
                if d is not None and d.key == key:
                    where.add("pre" if n.start_byte < pre_end else
                              "post" if n.start_byte >= post_start else "inner")
        if where != {"pre"} and where != {"post"}:
            return f"{name} is carried by more than the set-up or the wrap-up", set()
    # every subscripted access, by the buffer it reaches (row pointers followed)
    arrays: dict[str, list] = {}
    for n in walk(lp.body):
        if n.type != "subscript_expression":
            continue
        acc = m.subscript(n, lp.node)
        if acc is None:
            continue
        arrays.setdefault(acc[0], []).append((n, acc[1]))
    same: set[str] = set()
    for root, uses in arrays.items():
        written = any((t := assign_target(u.parent)) is not None
                      and t.start_byte == u.start_byte and t.end_byte == u.end_byte
                      for u, _ in uses)
        if not written:
            continue
        # an array written in the nest is kept in order only when the inner loop alone
        # touches it, always at one offset free of the outer variable: iteration (i, j)
        # then meets only (i', j), and the jammed inner loop applies them in the order of i
        offs = [off for _, off in uses]
        sp = split_terms(offs[0]) if offs[0] is not None else None
        if all(inner.node.start_byte <= u.start_byte < post_start for u, _ in uses) and \
                sp is not None and lp.key not in sp[0] and all(o == offs[0] for o in offs):
            same.add(root)
    if not scalars and not same:
        return "", set()
    # under a worksharing pragma the source itself would race on a carried value unless
    # a reduction clause names it; such a source is left as it is
    names = _carried_names(m, lp, inner, same)
    if any(re.match(r"omp\b", pragma_text(m.src, p)) for p in pragmas_before(lp.node)) and \
            not names <= reduced_names(m.src, lp):
        return ("a value carried under a worksharing pragma without a reduction clause "
                "for it"), set()
    # what is left once the kept scalars and arrays are set aside must be independent
    v = check_loop(m, lp, allow_reductions=False, exclude=frozenset(scalars.values()) | same)
    return (None, same) if v.ok else (v.reason, set())


def _carried_names(m: FunctionModel, lp: Loop, inner: Loop, same: set[str]) -> set[str]:
    """The names of what the iterations of `lp` carry past the jam: scalars declared
    outside it that its set-up or wrap-up assigns, and the arrays in `same` (Decl keys)."""
    return {r.split("@")[0] for r in same} | set(_outer_scalars(lp, inner))


def _outer_scalars(lp: Loop, inner: Loop) -> dict[str, str]:
    """Scalars declared outside `lp` that its set-up or wrap-up assigns: name -> Decl key."""
    out: dict[str, str] = {}
    for n in walk(lp.body):
        target = assign_target(n)
        if target is None or target.type != "identifier" or \
                inner.node.start_byte <= n.start_byte < inner.node.end_byte:
            continue
        d = lookup(target.text.decode(), target)
        if d is not None and not (d.node.start_byte >= lp.node.start_byte
                                  and d.node.end_byte <= lp.node.end_byte):
            out[target.text.decode()] = d.key
    return out


def _pragma_reason(s: Source, lp: Loop, carried: set[str] = frozenset()) -> str:
    """Why the OpenMP pragmas on `lp` stop the jam ("" when there are none, or only an
    `omp parallel for` whose clauses mean the same on groups of iterations: the jammed
    loop keeps it, its leftover iterations run on the calling thread). A reduction clause
    is kept when it names exactly the values the iterations carry (`carried`)."""
    omp = [pragma_text(s, p) for p in pragmas_before(lp.node)
           if re.match(r"omp\b", pragma_text(s, p))]
    keep = bool(carried) and reduced_names(s, lp) == carried
    if not omp or worksharing(s, lp, reductions=keep) is not None:
        return ""
    return f"carries an OpenMP pragma the jam cannot keep (`#pragma {omp[0]}`)"


def jam_pragma_reason(s: Source, lp: Loop, carried: set[str] = frozenset()) -> str:
    """Why the OpenMP pragmas on `lp` stop a jam ("" when they do not): see
    `_pragma_reason`."""
    return _pragma_reason(s, lp, carried)
