"""Prefix-sum loops (`acc += x[j]; y[j] = acc;`): recognizing one and what it stores."""

from __future__ import annotations

import re

from kernelcrew.agents.transforms.analysis.common import invariant_text, statements
from kernelcrew.agents.transforms.analysis.dependence import check_loop
from kernelcrew.agents.transforms.analysis.openmp import in_omp_construct
from kernelcrew.csource.affine import FunctionModel
from kernelcrew.csource.syntax import Loop, Node, lookup, pragma_text, pragmas_before, walk, within

VECTOR_MARK = "// kernelcrew: vector scan"  # vscan's blocks: their leftover loops stay


_ARITH = re.compile(r"(float|double|int|long|long long|unsigned|unsigned int|unsigned long|"
                    r"short|u?int(8|16|32|64)_t|size_t)")


def uses_of(node: Node, key: str) -> list[Node]:
    out = []
    for n in walk(node):
        if n.type == "identifier":
            d = lookup(n.text.decode(), n)
            if d is not None and d.key == key:
                out.append(n)
    return out


def scan_plan(m: FunctionModel, lp: Loop,
              threads_ok: bool = False) -> tuple[str, str, list[Node]] | str:
    """(the running sum's name, its type, the store statements) of a scan loop, or why
    `lp` is not one. `threads_ok`: the loop may sit inside an OpenMP construct (a thread's
    own rows), for a move that keeps it on one thread."""
    # stays long: one pass over the body's statements, the checks in the order their reasons
    # are given
    s = m.src
    line = s.line_of(lp.node)
    if lp.children or not lp.canonical or lp.step is not None or lp.inclusive:
        return f"loop at line {line} is not an innermost unit-step loop"
    if not threads_ok and (any(re.match(r"omp\b(?!\s+simd\b)", pragma_text(s, p))
                               for p in pragmas_before(lp.node))
                           or in_omp_construct(s, lp.node)):
        return f"loop at line {line} is inside an OpenMP construct"
    body = statements(lp.body)
    updates, stores, acc = [], [], None
    for st in body:
        if st.type != "expression_statement" or not st.named_children:
            continue
        e = st.named_children[0]
        if e.type != "assignment_expression":
            continue
        left, right = e.child_by_field_name("left"), e.child_by_field_name("right")
        op = e.child_by_field_name("operator").type
        if left.type == "identifier":
            d = lookup(left.text.decode(), left)
            if d is None or within(d.node, lp.node):
                continue
            value = right if op in ("+=", "-=") else None
            if op == "=" and right.type == "binary_expression" and \
                    right.child_by_field_name("operator").type == "+" and \
                    right.child_by_field_name("left").type == "identifier" and \
                    right.child_by_field_name("left").text.decode() == d.name:
                value = right.child_by_field_name("right")
            if value is None or uses_of(value, d.key):
                return f"{s.text_of(e)!r} at line {s.line_of(e)} is not a running sum"
            if acc is not None and acc.key != d.key:
                return f"loop at line {line} carries two scalars ({acc.name}, {d.name})"
            acc = d
            updates.append(st)
    if acc is None:
        return f"loop at line {line} carries no running sum"
    if acc.pointer or acc.array or acc.param:
        return f"{acc.name} is not a plain local"
    ty = acc.node.child_by_field_name("type")
    tname = s.text_of(ty).strip() if ty is not None else ""
    if not _ARITH.fullmatch(tname):
        return f"{acc.name} is not of an arithmetic type"
    for st in body:
        if st in updates:
            continue
        uses = uses_of(st, acc.key)
        if not uses:
            continue
        e = st.named_children[0] if st.type == "expression_statement" and \
            st.named_children else None
        if e is None or e.type != "assignment_expression" or \
                e.child_by_field_name("operator").type != "=" or \
                e.child_by_field_name("left").type != "subscript_expression" or \
                s.text_of(e.child_by_field_name("right")).strip() != acc.name:
            return (f"{acc.name} is read at line {s.line_of(uses[0])} other than by a store "
                    f"`y[i] = {acc.name};`")
        target = e.child_by_field_name("left")
        for n in walk(target):
            if n.type == "identifier":
                d = lookup(n.text.decode(), n)
                if d is not None and within(d.node, lp.body):
                    return f"the store at line {s.line_of(st)} is indexed by a local"
        stores.append(st)
    for n in walk(lp.body):  # updates and stores only at the top of the body
        if n.type == "identifier" and lookup(n.text.decode(), n) is not None and \
                lookup(n.text.decode(), n).key == acc.key and \
                not any(within(n, st) for st in updates + stores):
            return f"{acc.name} is used at line {s.line_of(n)} other than in the scan"
    if not stores:
        return f"loop at line {line} stores no prefix sum"
    v = check_loop(m, lp, allow_reductions=False, exclude=frozenset([acc.key]))
    if not v.ok:
        return v.reason
    for node in (lp.start, lp.end):
        if invariant_text(s, m, node, lp.node) is None:
            return f"the bounds of the loop at line {line} change inside it"
    return acc.name, tname.replace("const", "").strip(), stores
