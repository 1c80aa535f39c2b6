"""Loop fusion: consecutive passes over the same range that touch the same elements become
one loop (repeated inward: fused outer loops bring their inner loops together).

Legal for two sibling loops with the same header (start, bound, step, inclusive) and the
same pragmas (`fusion_blocker`) when: the bounds do not change in either loop; neither
writes a scalar declared outside the pair; both call only pure functions; and for every
array one of them writes and both touch, every access in either loop is the same
mixed-radix position of the loop variable (`y[i*cols + j]` in both: iteration i of the
fused loop touches in its second half only what iteration i of the first loop touched).
Refused otherwise, with the reason `fusion_blocker` gives.
"""

from __future__ import annotations

import itertools

from kernelcrew.agents.transforms.analysis.common import (
    finish,
    fresh_name,
    loop_header,
    model_of,
    statements,
)
from kernelcrew.agents.transforms.analysis.dependence import PURE_CALLS, accesses, defined_functions
from kernelcrew.csource.affine import VAR_MARK, FunctionModel, digits, split_terms
from kernelcrew.csource.syntax import (
    Edit,
    Loop,
    Node,
    Source,
    declarators,
    identifiers,
    lookup,
    pragma_text,
    pragmas_before,
    same,
    walk,
    within,
)

# ---------------------------------------------------------------- fusion

def fuse_loops(src: str, entry: str) -> str | None:
    """Fuse consecutive loops with the same header whose bodies touch, for every array
    they share, the same element partition of the loop variable (y[i*cols + j] in both):
    e.g. three passes over a tensor become one. Repeats inward (fused outer loops bring
    their inner loops together). None when nothing can be fused legally."""
    text = src
    changed = False
    for _ in range(16):
        got = model_of(text, entry)
        if got is None:
            return None
        s, m = got
        out = None
        for block in walk(m.body):
            if block.type != "compound_statement":
                continue
            stmts = [c for c in block.named_children if c.type not in ("comment", "preproc_call")]
            for a_node, b_node in itertools.pairwise(stmts):
                if a_node.type != "for_statement" or b_node.type != "for_statement":
                    continue
                a = next(x for x in m.loops if same(x.node, a_node))
                b = next(x for x in m.loops if same(x.node, b_node))
                out = _fuse_pair(s, m, a, b)
                if out is not None:
                    break
            if out is not None:
                break
        if out is None:
            break
        text, changed = out, True
    return text if changed else None


def fusion_blocker(s: Source, m: FunctionModel, a: Loop, b: Loop) -> str | None:
    """Why loops a and b cannot be fused (None: they can)."""
    if not a.canonical or not b.canonical:
        return "not countable loops"

    def norm(n: Node | None) -> str:
        return s.text_of(n).replace(" ", "") if n is not None else ""

    if (norm(a.start), norm(a.end), norm(a.step), a.inclusive) != \
            (norm(b.start), norm(b.end), norm(b.step), b.inclusive):
        return "different iteration ranges"
    pa = [pragma_text(s, p) for p in pragmas_before(a.node)]
    pb = [pragma_text(s, p) for p in pragmas_before(b.node)]
    if pa != pb:
        return "different pragmas"
    if b.var != a.var and any(True for _ in identifiers(b.body, a.var)):
        return f"{a.var} is used in the second loop"
    # bounds must not change in the first loop
    for n in (a.start, a.end):
        for ident in identifiers(n):
            d = lookup(ident.text.decode(), ident)
            if d is not None and any(_writes(m, x, d) for x in (a.body, b.body)):
                return f"bound {ident.text.decode()} changes in a loop"
    # scalars written in either loop and declared outside both
    for lp in (a, b):
        for n in walk(lp.body):
            t = n.child_by_field_name("left") if n.type == "assignment_expression" else \
                n.child_by_field_name("argument") if n.type == "update_expression" else None
            if t is None or t.type in ("subscript_expression",):
                continue
            if t.type != "identifier":
                return f"writes {s.text_of(t)!r}"
            d = lookup(t.text.decode(), t)
            if d is None or not within(d.node, lp.node):
                return f"updates {t.text.decode()}, declared outside the loops"
    for lp in (a, b):
        for n in walk(lp.body):
            if n.type == "call_expression":
                name = s.text_of(n.child_by_field_name("function")).replace("std::", "")
                if name not in PURE_CALLS and name not in defined_functions(s):
                    return f"calls {name}()"
    acc_a, acc_b = accesses(m, a.node), accesses(m, b.node)
    if isinstance(acc_a, str) or isinstance(acc_b, str):
        return acc_a if isinstance(acc_a, str) else acc_b
    written = {x.root for x in acc_a + acc_b if x.write}
    shared = written & ({x.root for x in acc_a} & {x.root for x in acc_b})
    for root in shared:
        sigs = set()
        for lp, accs in ((a, acc_a), (b, acc_b)):
            for x in accs:
                if x.root != root:
                    continue
                if x.offset is None:
                    return "an unresolved subscript"
                ds = digits(m, x.offset, lp.node)
                if ds is None:
                    return f"subscript {s.text_of(x.node)!r} is not a mixed-radix form"
                mine = [(v, c) for v, c in ds if v == lp.key]
                if len(mine) != 1:
                    return f"{s.text_of(x.node)!r} does not depend on {lp.var}"
                inv = split_terms(x.offset)[1]
                sigs.add((tuple(sorted(mine[0][1].items())), tuple(sorted(inv.items()))))
        if len(sigs) != 1:
            return f"the loops touch {root.split(VAR_MARK)[0]} at different positions"
    return None


def _writes(m: FunctionModel, node: Node, d) -> bool:
    for n in walk(node):
        t = n.child_by_field_name("left") if n.type == "assignment_expression" else \
            n.child_by_field_name("argument") if n.type == "update_expression" else None
        if t is not None and t.type == "identifier" and t.text.decode() == d.name:
            dd = lookup(d.name, t)
            if dd is not None and dd.key == d.key:
                return True
    return False


def _inner_text(s: Source, body: Node) -> str:
    if body.type == "compound_statement":
        return s.data[body.start_byte + 1:body.end_byte - 1].decode().strip("\n").rstrip()
    return s.indent_of(body) + s.text_of(body)


def _renamed(s: Source, lp: Loop, names: dict[str, str]) -> str:
    """The loop body's inner text with identifiers renamed."""
    body = lp.body
    base = body.start_byte + 1 if body.type == "compound_statement" else body.start_byte
    end = body.end_byte - 1 if body.type == "compound_statement" else body.end_byte
    edits = []
    for n in walk(body):
        if n.type == "identifier" and n.text.decode() in names:
            edits.append((n.start_byte - base, n.end_byte - base, names[n.text.decode()]))
    text = s.data[base:end]
    for a, b, t in sorted(edits, reverse=True):
        text = text[:a] + t.encode() + text[b:]
    out = text.decode()
    return out.strip("\n").rstrip() if body.type == "compound_statement" else \
        s.indent_of(body) + out


def _fuse_pair(s: Source, m: FunctionModel, a: Loop, b: Loop) -> str | None:
    if fusion_blocker(s, m, a, b) is not None:
        return None
    # locals declared at the top of b's body that a's body also declares get a new name
    def top_decls(lp: Loop) -> set[str]:

        out = set()
        for st in statements(lp.body):
            if st.type == "declaration":
                out |= {d[0] for d in declarators(st)}
        return out

    rename = {}
    if b.var != a.var:
        rename[b.var] = a.var
    for name in top_decls(b) & top_decls(a):
        rename[name] = fresh_name(m, f"{name}_2")
    between = s.data[a.node.end_byte:b.node.start_byte].decode()
    comments = [ln.strip() for ln in between.split("\n")
                if ln.strip() and not ln.strip().startswith("#")]
    ind_body = s.indent_of(a.body.named_children[0]) if a.body.type == "compound_statement" \
        and a.body.named_children else s.indent_of(a.node) + "    "
    ind = s.indent_of(a.node)
    parts = [_inner_text(s, a.body)]
    parts += [f"{ind_body}{c}" for c in comments]
    parts.append(_renamed(s, b, rename) if rename else _inner_text(s, b.body))
    new = f"{loop_header(s, a)} {{\n" + "\n".join(parts) + f"\n{ind}}}"
    # b's pragmas (equal to a's) and the comments between the loops are inside this range
    return finish(s, [Edit(a.node.start_byte, b.node.end_byte, new)])
