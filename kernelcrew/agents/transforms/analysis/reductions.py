"""Reductions: which scalar updates in a loop are reductions (+, *, max, min), and rewrites
of the if-max form into one that vectorizes."""

from __future__ import annotations

from kernelcrew.csource.affine import FunctionModel
from kernelcrew.csource.syntax import Decl, Loop, Node, unparen, walk


def call_name(model: FunctionModel, call: Node) -> str:
    return model.src.text_of(call.child_by_field_name("function")).replace("std::", "").strip()


def _same(model: FunctionModel, a: Node | None, b: Node | None) -> bool:
    return a is not None and b is not None and \
        model.src.text_of(a).replace(" ", "") == model.src.text_of(b).replace(" ", "")


def _mentions(node: Node | None, name: str) -> bool:
    return node is not None and any(
        n.type == "identifier" and n.text.decode() == name for n in walk(node))


def reduction(model: FunctionModel, assign: Node, d: Decl, lp: Loop
               ) -> tuple[str, tuple[Node, str] | None] | None:
    """The reduction operator of `assign` on scalar `d`, and an optional rewrite of the
    statement into a form that vectorizes (if-max -> conditional expression)."""
    name = d.name
    if assign.type != "assignment_expression":
        return None
    op = assign.child_by_field_name("operator").type
    right = assign.child_by_field_name("right")
    stmt = assign.parent
    if stmt is None or stmt.type != "expression_statement":
        return None
    holder = stmt.parent
    if op in ("+=", "-=", "*="):
        if _mentions(right, name):
            return None
        if holder is not None and holder.type == "if_statement":
            return None
        return ("*" if op == "*=" else "+"), None
    if op != "=":
        return None
    if holder is not None and holder.type == "compound_statement" and \
            len([c for c in holder.named_children if c.type != "comment"]) == 1 and \
            holder.parent is not None and holder.parent.type == "if_statement" and \
            holder.parent.child_by_field_name("consequence") == holder:
        holder = holder.parent  # `if (e > m) { m = e; }`, as most code writes it
    if holder is not None and holder.type == "if_statement":
        return _if_minmax(model, holder, assign, name)
    right = _own_cast_removed(model, right, d)
    if right.type == "binary_expression":
        bop = right.child_by_field_name("operator").type
        if bop in ("+", "-"):
            return ("+", None) if _one_term(right, name, ("+", "-")) else None
        if bop == "*":
            return ("*", None) if _one_term(right, name, ("*",)) else None
        return None
    if right.type == "call_expression":
        fn = call_name(model, right)
        args = right.child_by_field_name("arguments").named_children
        if fn in ("fmaxf", "fmax", "max", "fminf", "fmin", "min") and len(args) == 2:
            names = [a.type == "identifier" and a.text.decode() == name for a in args]
            if sum(names) == 1 and not any(_mentions(a, name) for a, m in zip(args, names,
                                                                             strict=True)
                                           if not m):
                return ("max" if "max" in fn else "min"), None
        return None
    if right.type == "conditional_expression":
        got = _cond_minmax(model, right, name)
        return (got, None) if got else None
    return None


def _own_cast_removed(model: FunctionModel, node: Node, d: Decl) -> Node:
    """`node` without parentheses and without a cast to the type `d` is declared with:
    `s = (acc_t)(s + a * b)` for `acc_t s` (a helper returning the accumulator's type,
    once inlined) adds to s as `s = s + a * b` does."""
    node = unparen(node)
    own = d.node.child_by_field_name("type") if d.node.type == "declaration" else None
    if own is None or d.pointer or d.array:
        return node
    text = model.src.text_of
    if node.type == "call_expression":
        # `(acc_t)(e)` of a typedef name the grammar does not know reads as a call
        fn, args = node.child_by_field_name("function"), node.child_by_field_name("arguments")
        if fn is not None and args is not None and fn.type == "parenthesized_expression" \
                and len(args.named_children) == 1 \
                and text(fn)[1:-1].split() == text(own).split():
            return _own_cast_removed(model, args.named_children[0], d)
    elif node.type == "cast_expression":
        ty, inner = node.child_by_field_name("type"), node.child_by_field_name("value")
        if ty is not None and inner is not None and text(ty).split() == text(own).split():
            return unparen(inner)
    return node


def _terms(node: Node, ops: tuple[str, ...], sign: int = 1) -> list[tuple[Node, int]]:
    """The operands of a chain of `ops` (`a + b - (c + d)`), each with its sign: -1 for a
    term subtracted an odd number of times."""
    while node.type == "parenthesized_expression" and node.named_children:
        node = node.named_children[0]
    if node.type == "binary_expression":
        op = node.child_by_field_name("operator").type
        if op in ops:
            left, right = node.child_by_field_name("left"), node.child_by_field_name("right")
            return _terms(left, ops, sign) + _terms(right, ops, -sign if op == "-" else sign)
    return [(node, sign)]


def _one_term(expr: Node, name: str, ops: tuple[str, ...]) -> bool:
    """`name` is one operand of the chain, added (not subtracted), and no other operand
    mentions it: `s = s + a*b + c*d` or `s = a - b + s` add a value to s; `p = p * a * b`
    multiplies it (the BLAS-style unrolled forms)."""
    mine = [sg for n, sg in _terms(expr, ops)
            if n.type == "identifier" and n.text.decode() == name]
    others = [n for n, _ in _terms(expr, ops)
              if not (n.type == "identifier" and n.text.decode() == name)]
    return mine == [1] and not any(_mentions(n, name) for n in others)


def _cond_minmax(model: FunctionModel, node: Node, name: str) -> str | None:
    """`e > m ? e : m` (max) and its mirror images."""
    cond = node.child_by_field_name("condition")
    a, b = node.child_by_field_name("consequence"), node.child_by_field_name("alternative")
    while cond is not None and cond.type == "parenthesized_expression":
        cond = cond.named_children[0]
    if cond is None or cond.type != "binary_expression":
        return None
    op = cond.child_by_field_name("operator").type
    cl, cr = cond.child_by_field_name("left"), cond.child_by_field_name("right")

    def is_m(n: Node | None) -> bool:
        return n is not None and n.type == "identifier" and n.text.decode() == name

    # normalize to (e OP m)
    if is_m(cl) and not is_m(cr):
        cl, cr = cr, cl
        op = {">": "<", "<": ">", ">=": "<=", "<=": ">="}.get(op, op)
    if not is_m(cr) or _mentions(cl, name):
        return None
    if _same(model, a, cl) and is_m(b):
        return "max" if op in (">", ">=") else "min" if op in ("<", "<=") else None
    if is_m(a) and _same(model, b, cl):
        return "min" if op in (">", ">=") else "max" if op in ("<", "<=") else None
    return None


def _if_minmax(model: FunctionModel, ifs: Node, assign: Node, name: str
               ) -> tuple[str, tuple[Node, str]] | None:
    """`if (e > m) m = e;` -> max, rewritten as `m = e > m ? e : m;` so it vectorizes."""
    if ifs.child_by_field_name("alternative") is not None:
        return None
    cond = ifs.child_by_field_name("condition")
    inner = cond.named_children[0] if cond is not None and cond.named_children else None
    if inner is None or inner.type != "binary_expression":
        return None
    op = inner.child_by_field_name("operator").type
    cl, cr = inner.child_by_field_name("left"), inner.child_by_field_name("right")
    value = assign.child_by_field_name("right")
    src = model.src
    if cr.type == "identifier" and cr.text.decode() == name and _same(model, cl, value):
        kind = {">": "max", ">=": "max", "<": "min", "<=": "min"}.get(op)
    elif cl.type == "identifier" and cl.text.decode() == name and _same(model, cr, value):
        kind = {"<": "max", "<=": "max", ">": "min", ">=": "min"}.get(op)
    else:
        return None
    if kind is None or _mentions(value, name):
        return None
    e = src.text_of(value)
    text = f"{name} = ({src.text_of(inner)}) ? {e} : {name};"
    return kind, (ifs, text)
