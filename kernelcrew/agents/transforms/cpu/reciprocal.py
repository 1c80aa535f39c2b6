"""Strength reduction: a division by a value the loop does not change, as a multiply.

Normalizing code divides every element by one total:

    for (j = 0; j < cols; ++j) y[j] = y[j] / sum;        // or y[j] /= sum;

A vector division takes several times as long as a multiply (on AVX-512 a `vdivps` issues
once every 5-10 cycles, a `vmulps` twice a cycle), and g++ keeps the division without
-freciprocal-math. The reciprocal is taken once before the loop:

    const float kc_inv_sum = 1.0f / sum;
    for (j = 0; j < cols; ++j) y[j] = y[j] * kc_inv_sum;

The result differs from the division by at most an ulp or so (x * (1/d) is rounded twice);
zeros, infinities and NaN come out as they did, but a denominator so small that its
reciprocal overflows (below about 3e-39 in float) would turn finite quotients into
infinities, which the correctness check against the reference would catch. Taken where the
divisor is a float or double variable declared outside the loop and not assigned in it
(nor through a pointer: it is a plain local or parameter), and the division is a float one.
"""

from __future__ import annotations

from kernelcrew.agents.transforms.analysis.common import finish, fresh_name, in_small_path, model_of
from kernelcrew.csource.syntax import Edit, Loop, Node, lead_start, lookup, walk, within

_FLOATS = {"float": "1.0f", "double": "1.0"}


def _divisor(m, lp: Loop, n: Node) -> tuple[str, str] | None:
    """(divisor name, its type) of `E / d` or `x /= d` when d can be hoisted, else None."""
    op = {"binary_expression": "/", "assignment_expression": "/="}.get(n.type)
    if op is None or n.child_by_field_name("operator").type != op:
        return None
    d = n.child_by_field_name("right")
    while d.type == "parenthesized_expression" and len(d.named_children) == 1:
        d = d.named_children[0]
    if d.type != "identifier":
        return None
    decl = lookup(d.text.decode(), d)
    if decl is None or decl.pointer or decl.array or within(decl.node, lp.node):
        return None
    ty = decl.node.child_by_field_name("type")
    words = m.src.text_of(ty).replace("const", "").split() if ty is not None else []
    if len(words) != 1 or words[0] not in _FLOATS:
        return None
    name = d.text.decode()
    for x in walk(lp.node):  # not assigned in the loop
        target = x.child_by_field_name("left") if x.type == "assignment_expression" else \
            x.child_by_field_name("argument") if x.type == "update_expression" else None
        if target is not None and target.type == "identifier" and target.text.decode() == name:
            return None
    for x in walk(m.fn):  # nor through its address, anywhere
        if x.type == "pointer_expression" and x.child_by_field_name("operator").type == "&" \
                and x.child_by_field_name("argument").type == "identifier" and \
                x.child_by_field_name("argument").text.decode() == name:
            return None
    return name, words[0]


def reciprocal(src: str, entry: str) -> str | None:
    """Divisions by a loop-invariant float or double in the loops of `entry` as multiplies by
    its reciprocal, taken once before the innermost loop that holds them."""
    got = model_of(src, entry)
    if got is None:
        return None
    s, m = got
    edits: list[Edit] = []
    taken: set[str] = set()
    for lp in m.loops:
        if lp.children or in_small_path(lp.node):
            continue
        found: dict[str, str] = {}
        sites: list[tuple[Node, str]] = []
        for n in walk(lp.body):
            got_d = _divisor(m, lp, n)
            if got_d is not None:
                found[got_d[0]] = got_d[1]
                sites.append((n, got_d[0]))
        if not sites:
            continue
        names = {}
        for d in found:
            base = fresh_name(m, f"kc_inv_{d}")
            k = 2
            while base in taken:
                base, k = f"kc_inv_{d}{k}", k + 1
            taken.add(base)
            names[d] = base
        ind = s.indent_of(lp.node)
        at = lead_start(s, lp.node)
        decls = "".join(f"{ind}const {ty} {names[d]} = {_FLOATS[ty]} / {d};\n"
                        for d, ty in found.items())
        if lp.node.parent is not None and lp.node.parent.type == "compound_statement":
            edits.append(Edit(at, at, decls))
        else:  # the loop is the body of a statement: a block holds both
            edits.append(Edit(at, at, f"{ind}{{\n{decls}"))
            edits.append(Edit(lp.node.end_byte, lp.node.end_byte, f"\n{ind}}}"))
        for n, d in sites:
            op = n.child_by_field_name("operator")
            right = n.child_by_field_name("right")
            edits.append(Edit(op.start_byte, op.end_byte, "*=" if op.type == "/=" else "*"))
            edits.append(Edit(right.start_byte, right.end_byte, names[d]))
    return finish(s, edits) if edits else None
