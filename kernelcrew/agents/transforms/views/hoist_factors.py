"""A product's leading factors that an innermost loop does not change, taken once before it.

The polyhedral suite writes a matrix product's update as one expression,

    for (j = 0; j < nj; j++)
        C[i][j] += alpha * A[i][k] * B[k][j];

which C reads as `(alpha * A[i][k]) * B[k][j]`: the left product is the same for every j.
Kept in a local before the loop, the statement becomes the `C[i][j] += a * B[k][j]` form
that register blocking and the other matrix moves read:

    const double alpha_A = alpha * A[i][k];
    for (j = 0; j < nj; j++)
        C[i][j] += alpha_A * B[k][j];

The same multiplications in the same order, so the same values. Taken where the loop's
body is that one update (`+=`, `-=`, or `X = X + ...`), the hoisted part is the left
operand of the product's last multiplication, it does not depend on the loop's counter,
calls nothing, writes nothing and reads no array the loop writes; every name in it is
declared with the target's own floating type (so the local, of that type, holds exactly
the value the expression had); the loop has no pragma but simd hints.
"""

from __future__ import annotations

import re

from kernelcrew.agents.transforms.analysis.common import (
    finish,
    mentions_var,
    model_of,
    statements,
)
from kernelcrew.agents.transforms.analysis.types import resolve
from kernelcrew.csource.affine import FunctionModel
from kernelcrew.csource.syntax import (
    Edit,
    Loop,
    Node,
    Source,
    lead_start,
    lookup,
    pragma_text,
    pragmas_before,
    unparen,
    walk,
)

_HINT = re.compile(r"omp\s+simd\b|GCC\s+unroll\b|unroll\b")


def _update(st: Node) -> tuple[Node, Node] | None:
    """`X += E;`, `X -= E;` or `X = X + E;` -> (X, E)."""
    if st.type != "expression_statement" or not st.named_children:
        return None
    e = st.named_children[0]
    if e.type != "assignment_expression":
        return None
    left, right = e.child_by_field_name("left"), e.child_by_field_name("right")
    op = e.child_by_field_name("operator").type
    if op in ("+=", "-="):
        return left, right
    r = unparen(right)
    if op == "=" and r.type == "binary_expression" and \
            r.child_by_field_name("operator").type in ("+", "-") and \
            "".join(r.child_by_field_name("left").text.decode().split()) == \
            "".join(left.text.decode().split()):
        return left, r.child_by_field_name("right")
    return None


def _type_of(s: Source, m: FunctionModel, node: Node) -> str | None:
    """The resolved floating type of a name or an element read (None: unknown)."""
    base = node
    while base.type == "subscript_expression":
        base = base.child_by_field_name("argument")
    if base.type != "identifier":
        return None
    d = lookup(base.text.decode(), base)
    if d is None:
        return None
    ty = d.node.child_by_field_name("type")
    if ty is None or (node.type == "subscript_expression") != (d.pointer or d.array):
        return None
    return resolve(s, s.text_of(ty))


def _factors(n: Node) -> list[Node]:
    """The leaves of a chain of multiplications (through parentheses)."""
    n = unparen(n)
    if n.type == "binary_expression" and n.child_by_field_name("operator").type == "*":
        return _factors(n.child_by_field_name("left")) + \
            _factors(n.child_by_field_name("right"))
    return [n]


def _hoistable(s: Source, m: FunctionModel, lp: Loop, part: Node, elem: str,
               written: set[str]) -> bool:
    """`part` is a product of names and element reads of type `elem`, fixed in the loop."""
    if mentions_var(m, part, lp):
        return False
    for leaf in _factors(part):
        if leaf.type not in ("identifier", "subscript_expression") or \
                _type_of(s, m, leaf) != elem:
            return False
        if any(n.type in ("call_expression", "assignment_expression", "update_expression")
               for n in walk(leaf)):
            return False
        root = leaf
        while root.type == "subscript_expression":
            root = root.child_by_field_name("argument")
        if root.text.decode() in written:
            return False
    return True


def _once(s: Source, m: FunctionModel) -> str | None:
    for lp in m.loops:
        if lp.children or not lp.canonical:
            continue
        if any(not _HINT.match(pragma_text(s, p)) for p in pragmas_before(lp.node)):
            continue
        body = statements(lp.body)
        got = _update(body[0]) if len(body) == 1 else None
        if got is None:
            continue
        target, added = got
        prod = unparen(added)
        if prod.type != "binary_expression" or prod.child_by_field_name("operator").type != "*":
            continue
        part = unparen(prod.child_by_field_name("left"))
        if part.type not in ("binary_expression", "subscript_expression"):
            continue  # a name alone is already what the moves read
        elem = _type_of(s, m, target)
        if elem not in ("float", "double"):
            continue
        written = set()
        for n in walk(lp.body):
            if n.type == "assignment_expression":
                w = n.child_by_field_name("left")
                while w.type == "subscript_expression":
                    w = w.child_by_field_name("argument")
                written.add(w.text.decode())
        if not _hoistable(s, m, lp, part, elem, written):
            continue
        words = []
        for leaf in _factors(part):
            while leaf.type == "subscript_expression":
                leaf = leaf.child_by_field_name("argument")
            words.append(leaf.text.decode())
        taken = {n.text.decode() for n in walk(m.fn) if n.type == "identifier"}
        base = "_".join(dict.fromkeys(words))[:24] or "factor"
        name = next(f"{base}{k or ''}" for k in range(len(taken) + 2)
                    if f"{base}{k or ''}" not in taken)
        ty = s.text_of(lookup(target.text.decode().split("[")[0].strip(), target)
                       .node.child_by_field_name("type"))
        ty = re.sub(r"\bconst\b", "", ty).strip()
        ind = s.indent_of(lp.node)
        at = lead_start(s, lp.node)
        decl = f"{ind}const {ty} {name} = {s.text_of(part)};\n"
        edits = [Edit(part.start_byte, part.end_byte, name)]
        if lp.node.parent is not None and lp.node.parent.type == "compound_statement":
            edits.append(Edit(at, at, decl))
        else:  # the unbraced body of a loop: the declaration and the loop get braces
            outer = s.indent_of(lp.node.parent)
            edits.append(Edit(at, at, f"{outer}{{\n{decl}"))
            edits.append(Edit(lp.node.end_byte, lp.node.end_byte, f"\n{outer}}}"))
        return finish(s, edits)
    return None


def hoist_factors(src: str, entry: str) -> str | None:
    """Hoist every loop-invariant leading factor of an update (module docstring); None when
    there is none."""
    out, changed = src, False
    for _ in range(8):
        got = model_of(out, entry)
        if got is None:
            break
        new = _once(*got)
        if new is None:
            break
        out, changed = new, True
    return out if changed else None
