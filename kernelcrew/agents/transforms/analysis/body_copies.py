"""Copies of a loop body for a jammed or unrolled loop: counters replaced, locals of the
copies renamed, and the header of a loop that runs its iterations in groups."""

from __future__ import annotations

import re

from kernelcrew.agents.transforms.analysis.common import invariant_text
from kernelcrew.csource.affine import FunctionModel
from kernelcrew.csource.syntax import Loop, Node, Source, declarators, lookup, walk

JAM_MARK = "// kernelcrew: jammed by"


def _declared_names(node: Node) -> dict[int, int]:
    """Start byte of each declared name's identifier -> start byte of its declaration."""
    out: dict[int, int] = {}
    for n in walk(node):
        if n.type != "declaration":
            continue
        for d in n.children_by_field_name("declarator"):
            while d is not None and d.type != "identifier":
                d = d.child_by_field_name("declarator") or (
                    d.named_children[0] if d.named_children else None)
            if d is not None:
                out[d.start_byte] = n.start_byte
    return out


def rename_copy(m: FunctionModel, node: Node, lp: Loop, k: int, var_text: str | None,
                renames: set[str], sep: str = "_") -> str:
    """The text of `node` for copy k of a loop body: the loop variable becomes `var_text`
    (unchanged when None), and in copies k > 0 the declarations named in `renames` (Decl
    keys) get a `{sep}k` suffix (`_k` by default), at their declaration and every use."""
    return copy_text(m, node, [(lp, var_text)],
                     {key: f"{key.split('@')[0]}{sep}{k}" for key in renames} if k else {})


def copy_suffix(names: list[str], copies: int, taken: set[str]) -> str | None:
    """The separator (`_`, `_j`, `_jj`, ...) whose suffixed copies `name{sep}k` of every
    name, k = 1 .. copies - 1, are all free (None after a few tries)."""
    for sep in ("_", "_j", "_jj", "_jjj"):
        if not any(f"{n}{sep}{k}" in taken for n in names for k in range(1, copies)):
            return sep
    return None


def copy_text(m: FunctionModel, node: Node, subs: list[tuple[Loop, str | None]],
               renames: dict[str, str]) -> str:
    """The text of `node` with each loop's counter replaced by its text (None: kept) and
    the declarations in `renames` (Decl key -> new name) renamed where declared and used."""
    s = m.src
    base = node.start_byte
    data = s.data[node.start_byte:node.end_byte]
    edits = []
    declared = _declared_names(node)
    for n in walk(node):
        if n.type != "identifier":
            continue
        name = n.text.decode()
        if n.start_byte in declared:
            new = renames.get(f"{name}@{declared[n.start_byte]}")
            if new is not None:
                edits.append((n.start_byte - base, n.end_byte - base, new))
            continue
        d = lookup(name, n)
        if d is None:
            continue
        hit = next((t for lp, t in subs if lp.decl is not None and name == lp.var
                    and d.node.start_byte == lp.decl.start_byte), False)
        if hit is not False:
            if hit is not None:
                edits.append((n.start_byte - base, n.end_byte - base, hit))
        elif d.key in renames:
            edits.append((n.start_byte - base, n.end_byte - base, renames[d.key]))
    for a, b, t in sorted(edits, reverse=True):
        data = data[:a] + t.encode() + data[b:]
    return data.decode()


def body_locals(body: Node, skip: Node | None = None) -> set[str]:
    """Decl keys of the declarations inside a loop body (`skip`: an inner loop's counter)."""
    out: set[str] = set()
    for n in walk(body):
        if n.type == "declaration" and (skip is None or n.start_byte != skip.start_byte):
            for name, _, _, _ in declarators(n):
                out.add(f"{name}@{n.start_byte}")  # Decl.key
    return out


def jam_header(s: Source, m: FunctionModel, lp: Loop, factor: int, taken: set[str]
               ) -> tuple[str, str, str, str, str, str, str] | None:
    """What a loop jammed by `factor` is written with: (var, init, start, end, lim, cmp,
    lim_text): `for (init = start; var < lim; var += factor)` runs the groups, `for (init
    = lim; var cmp end; ++var)` the leftover iterations, and `lim_text` declares `lim`, a
    fresh name. None when a bound is not fixed before the loop or the counter's type is
    unknown."""
    start = invariant_text(s, m, lp.start, lp.node)
    end = invariant_text(s, m, lp.end, lp.node)
    if start is None or end is None:
        return None
    var = lp.var
    own = lp.decl is not None and lp.decl.parent is not None and \
        lp.decl.parent.start_byte == lp.node.start_byte
    if own:
        ty = lp.decl.child_by_field_name("type")
    else:
        d = lookup(var, lp.node)
        ty = d.node.child_by_field_name("type") if d is not None else None
    if ty is None:
        return None
    decl_type = s.text_of(ty).replace("const ", "").strip()
    lim = next(f"{var}_jam{k or ''}" for k in range(len(taken) + 1)
               if f"{var}_jam{k or ''}" not in taken)
    cmp = "<=" if lp.inclusive else "<"
    e, b = paren(end), paren(start)
    span = e if b == "0" else f"{e} - {b}"
    count = f"({span} + 1)" if lp.inclusive else (span if span == e else f"({span})")
    init = f"{decl_type} {var}" if own else var
    lim_text = (f"const {decl_type} {lim} = {e} {'>=' if lp.inclusive else '>'} {b} ? "
                f"{'' if b == '0' else b + ' + '}{count} / {factor} * {factor} : {b};")
    return var, init, start, end, lim, cmp, lim_text


def paren(text: str) -> str:
    return text if re.fullmatch(r"[\w.]+", text) else f"({text})"


def folded_copies(body: list[Node], copies: range, copy, indent: str) -> str | None:
    """The copies of a one-statement body `t[j] += e;` that every copy adds into the same
    element, as one statement, `t[j] = ((t[j] + (e0)) + (e1)) + ...;`: the same additions
    in the same order (the same result, bit for bit), with one load and one store of the
    element instead of one per copy. `t[j] = t[j] + e;` is the same update. None when the
    body is anything else, the copies' targets differ (per-copy accumulators), or an added
    term reads the target's array."""
    if len(body) != 1 or body[0].type != "expression_statement" or \
            not body[0].named_children or body[0].named_children[0].type != "assignment_expression":
        return None
    asg = body[0].named_children[0]
    left, right = asg.child_by_field_name("left"), asg.child_by_field_name("right")
    op = asg.child_by_field_name("operator")
    if left is None or right is None or op is None:
        return None
    sign = op.text.decode()[0]
    if op.text == b"=" and right.type == "binary_expression" and \
            right.child_by_field_name("operator").type in ("+", "-") and \
            "".join(right.child_by_field_name("left").text.decode().split()) == \
            "".join(left.text.decode().split()):
        sign = right.child_by_field_name("operator").type
        right = right.child_by_field_name("right")
    elif op.text not in (b"+=", b"-="):
        return None
    targets = {copy(left, k) for k in copies}
    if len(targets) != 1 or left.type not in ("subscript_expression", "identifier",
                                              "pointer_expression", "field_expression"):
        return None
    base = left
    while base.type != "identifier" and base.named_children:
        base = base.named_children[0]
    reads = {n.text for n in walk(right) if n.type == "identifier"}
    if base.type != "identifier" or base.text in reads:
        return None
    target = targets.pop()
    text = target
    for k in copies:
        text = f"({text} {sign} {paren(copy(right, k))})"
    return f"{indent}{target} = {text[1:-1]};\n"


def folded_body(body: list[Node], copies: range, copy, indent: str) -> str | None:
    """The copies of an inner loop's body, statement by statement: each statement's
    copies together, an update that every copy makes to one element folded into one
    statement (`folded_copies`). The copies' statements are reordered (statement 2 of
    row i after statement 1 of row i + 1), which keeps the meaning when the copies share
    no variable but the elements so folded, each updated by one statement only: the
    caller's legality (rows independent but for those elements, locals renamed per copy)
    gives the first; None here when a target is updated by two statements, when no
    statement folds, or when the body is one statement (`folded_copies` then)."""
    if len(body) < 2:
        return None
    parts: list[str] = []
    targets: list[str] = []
    bases: dict[bytes, int] = {}  # the folded targets' arrays -> their statement's start
    for st in body:
        one = folded_copies([st], copies, copy, indent)
        if one is not None:
            left = st.named_children[0].child_by_field_name("left")
            target = "".join(left.text.decode().split())
            if target in targets:
                return None
            targets.append(target)
            base = left
            while base.type != "identifier" and base.named_children:
                base = base.named_children[0]
            bases[base.text] = st.start_byte
            parts.append(one)
        else:
            parts.extend(f"{indent}{copy(st, k)}\n" for k in copies)
    # another statement that reads a folded array would see all the rows' updates at once
    for st in body:
        if any(n.type == "identifier" and n.text in bases and bases[n.text] != st.start_byte
               for n in walk(st)):
            return None
    return "".join(parts) if bases else None
