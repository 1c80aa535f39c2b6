"""Calls of float math functions inside loops, replaced by inline helpers the compiler
can vectorize (the engine of the vector-math moves)."""

from __future__ import annotations

from kernelcrew.agents.transforms.analysis.common import helpers_at
from kernelcrew.csource.syntax import (
    Edit,
    Node,
    Source,
    apply_edits,
    enclosed_by,
    find_function,
    walk,
)

_LOOPS = ("for_statement", "while_statement", "do_statement")


def _float_only(s: Source, node: Node) -> bool:
    """No double literal or double variable in the expression."""
    if "double" in s.text_of(node):
        return False
    for n in walk(node):
        if n.type == "number_literal":
            t = n.text.decode().lower()
            if ("." in t or "e" in t) and not t.startswith("0x") and not t.endswith("f"):
                return False
    return True


def _one_plus_or_minus(s: Source, call: Node) -> str | None:
    """"+" or "-" when `call` is the right operand of `1 + call` / `1 - call` or the left
    of `call + 1` (the literal one in any float spelling), else None."""
    parent = call.parent
    if parent is None or parent.type != "binary_expression":
        return None
    left, right = parent.child_by_field_name("left"), parent.child_by_field_name("right")
    op = s.text_of(parent.child_by_field_name("operator")).strip()
    other = right if left is not None and left.id == call.id else left
    if other is None or other.type != "number_literal" or op not in "+-":
        return None
    try:
        one = float(s.text_of(other).rstrip("fFlL")) == 1.0
    except ValueError:
        return None
    if not one or (op == "-" and other.id != left.id):
        return None  # `call - 1` is not a form with a cheaper identity here
    return op


def replace_math_calls(src: str, entry: str, replace: dict[str, str],
                       helpers: dict[str, tuple[str, tuple[str, ...]]],
                       loops: tuple[str, ...] = _LOOPS,
                       one_plus: dict[str, str] | None = None) -> str | None:
    """Replace the one-argument float calls named in `replace` (libm name -> inline
    version) inside the loops of `entry` (`loops`: the statement types that count), and put
    the definitions the replacements need (`helpers`: name -> (code, the helpers it uses))
    before the function, after any comment that introduces it; helpers the file already
    defines are not added again. `one_plus` (libm name -> inline version of 1 + f(x))
    replaces a whole `1 + f(u)` by `g(u)` and `1 - f(u)` by `g(-(u))` (an odd f) where the
    argument holds no other call to replace. None when nothing is replaced, or when the
    function computes in double (the replacements are float-accurate)."""
    s = Source(src)
    fn = find_function(s, entry)
    if fn is None or "double" in s.text_of(fn):
        return None
    edits: list[Edit] = []
    needed: set[str] = set()
    for n in walk(fn):
        if n.type != "call_expression":
            continue
        fnode = n.child_by_field_name("function")
        name = s.text_of(fnode).strip()
        args = n.child_by_field_name("arguments").named_children
        if name not in replace or len(args) != 1 or not _float_only(s, args[0]) or \
                not enclosed_by(n, fn, loops):
            continue
        sign = _one_plus_or_minus(s, n) if one_plus and name in one_plus else None
        nested = any(c.type == "call_expression" and s.text_of(
            c.child_by_field_name("function")).strip() in replace for c in walk(args[0]))
        if sign is not None and not nested:
            arg = s.text_of(args[0])
            edits.append(Edit(n.parent.start_byte, n.parent.end_byte,
                              f"{one_plus[name]}({arg if sign == '+' else f'-({arg})'})"))
            needed.add(one_plus[name])
            continue
        edits.append(Edit(fnode.start_byte, fnode.end_byte, replace[name]))
        needed.add(replace[name])
    if not edits:
        return None
    order: list[str] = []

    def want(h: str) -> None:
        for dep in helpers[h][1]:
            want(dep)
        if h not in order:
            order.append(h)

    for h in sorted(needed):
        want(h)
    code = "".join(helpers[h][0] + "\n" for h in order if find_function(s, h) is None)
    if code:
        pos = helpers_at(s, fn)
        edits.append(Edit(pos, pos, code))
    return apply_edits(s, edits)
