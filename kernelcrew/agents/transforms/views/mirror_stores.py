"""A symmetric result's mirror stores, moved out of the triangle into a pass of their own.

Code that fills a symmetric matrix (a covariance, a Gram matrix, a distance table)
computes the upper triangle and copies each element to its mirror as it goes:

    for (i = 0; i < m; i++)
        for (j = i; j < m; j++) {
            cov[i][j] = ...;
            cov[j][i] = cov[i][j];
        }

The mirror store writes the lower triangle, which nothing else in the nest touches, so
to the dependence analysis the rows are linked (row i writes column i, which the rows
after it own). Stored after the nest, in the same order, the mirrors write the same
values:

    for (i = 0; i < m; i++)
        for (j = i; j < m; j++) { cov[i][j] = ...; }
    for (i = 0; i < m; i++)          // the mirror stores, after the triangle
        for (j = i; j < m; j++) cov[j][i] = cov[i][j];

Taken where: the mirror `X[b][a] = X[a][b];` is the last statement of the inner loop,
whose counter b starts at the outer counter a (or a plus a non-negative constant), so
b >= a; every other access to X in the nest is `X[a][b]`, the element the iteration
computes (written once per pair, so it holds the mirrored value to the end of the nest);
X is a 2D array parameter; the nest has no `break`, `continue`, `return` or `goto` and no
OpenMP pragma; the bounds are not written in it. The lower elements b > a are then
written only by the mirrors, and the diagonal's mirror copies an element onto itself.
"""

from __future__ import annotations

import re

from kernelcrew.agents.transforms.analysis.common import finish, model_of, statements, written_names
from kernelcrew.csource.affine import FunctionModel
from kernelcrew.csource.syntax import (
    Edit,
    Loop,
    Node,
    Source,
    array_dims,
    lookup,
    pragmas_before,
    walk,
)

MARK = "// kernelcrew: the mirror stores, after the triangle"


def _index_texts(n: Node) -> tuple[str, list[str]] | None:
    """`X[a][b]` -> ("X", ["a", "b"])."""
    idx: list[str] = []
    while n.type == "subscript_expression":
        lst = n.child_by_field_name("indices")
        if lst is None or len(lst.named_children) != 1:
            return None
        idx.insert(0, "".join(lst.named_children[0].text.decode().split()))
        n = n.child_by_field_name("argument")
    return (n.text.decode(), idx) if n.type == "identifier" else None


def _mirror(s: Source, st: Node, a: str, b: str) -> str | None:
    """`X[b][a] = X[a][b];` -> X."""
    if st.type != "expression_statement" or not st.named_children:
        return None
    e = st.named_children[0]
    if e.type != "assignment_expression" or e.child_by_field_name("operator").type != "=":
        return None
    left = _index_texts(e.child_by_field_name("left"))
    right = _index_texts(e.child_by_field_name("right"))
    if left is None or right is None or left[0] != right[0]:
        return None
    return left[0] if left[1] == [b, a] and right[1] == [a, b] else None


def _starts_at(s: Source, inner: Loop, a: str) -> bool:
    """The inner counter starts at `a` or `a + k` for a literal k >= 0."""
    if inner.start is None:
        return False
    text = "".join(s.text_of(inner.start).split())
    return text == a or re.fullmatch(rf"{re.escape(a)}\+\d+|\d+\+{re.escape(a)}", text) \
        is not None


def _once(s: Source, m: FunctionModel) -> str | None:
    for outer in m.loops:
        if len(outer.children) != 1 or not outer.canonical or outer.step is not None:
            continue
        inner = outer.children[0]
        only = statements(outer.body)
        if len(only) != 1 or only[0].start_byte != inner.node.start_byte:
            continue
        if not inner.canonical or inner.step is not None or \
                not _starts_at(s, inner, outer.var):
            continue
        body = statements(inner.body)
        if len(body) < 2 or inner.body.type != "compound_statement":
            continue
        x = _mirror(s, body[-1], outer.var, inner.var)
        if x is None:
            continue
        d = lookup(x, outer.node)
        if d is None or not d.param or len(array_dims(d.node, x) or []) != 2:
            continue
        if any(n.type in ("break_statement", "continue_statement", "return_statement",
                          "goto_statement") for n in walk(outer.node)) or \
                pragmas_before(outer.node) or pragmas_before(inner.node) or \
                any(n.type == "preproc_call" for n in walk(outer.node)):
            continue
        mirror = body[-1]
        ok = True
        for n in walk(outer.body):
            if n.type != "identifier" or n.text.decode() != x:
                continue
            if mirror.start_byte <= n.start_byte < mirror.end_byte:
                continue
            top = n
            while top.parent is not None and top.parent.type == "subscript_expression" and \
                    top.parent.child_by_field_name("argument").start_byte == top.start_byte:
                top = top.parent
            got = _index_texts(top) if top.type == "subscript_expression" else None
            if got is None or got[1] != [outer.var, inner.var]:
                ok = False
                break
        names = {outer.var, inner.var}
        bounds = [outer.start, outer.end, inner.end]
        if not ok or any(b is None for b in bounds) or any(
                n.type == "identifier" and n.text.decode() in written_names(outer.body) - names
                for b in bounds for n in walk(b)):
            continue
        ind = s.indent_of(outer.node)
        head_o = s.data[outer.node.start_byte:outer.body.start_byte].decode().rstrip()
        head_i = s.data[inner.node.start_byte:inner.body.start_byte].decode().rstrip()
        text = (f"\n{ind}{MARK}\n{ind}{head_o}\n{ind}    {head_i}\n{ind}        "
                f"{s.text_of(mirror).strip()}")
        edits = [Edit(s.line_start(mirror), mirror.end_byte + (
            1 if s.data[mirror.end_byte:mirror.end_byte + 1] == b"\n" else 0), ""),
            Edit(outer.node.end_byte, outer.node.end_byte, text)]
        return finish(s, edits)
    return None


def split_mirrors(src: str, entry: str) -> str | None:
    """Move each symmetric nest's mirror stores into a pass after it (module docstring);
    None when there is none."""
    out, changed = src, False
    for _ in range(4):
        got = model_of(out, entry)
        if got is None:
            break
        new = _once(*got)
        if new is None:
            break
        out, changed = new, True
    return out if changed else None
