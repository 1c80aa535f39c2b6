"""Which functions of a kernel file the loop transformations may work on.

Real C seldom does its work in the entry itself: the entry is a thin wrapper that converts
the harness's `int64_t` sizes and `const` pointers and calls a `static` helper that holds
the loops (`static void layernorm_forward(float* out, float* inp, int C) {...}`). Every
transformation works on the entry and on the helpers it calls, in place.

The analysis assumes that distinct pointer parameters do not overlap. For the entry the
harness guarantees it (every input and output is its own buffer). For a helper it has to
follow from its call sites: a helper is in scope only when every call to it comes from a
function in scope and passes, at each call, pointers that resolve to distinct buffers of
the caller (`helper(y, x, n)`, not `helper(y, y, n)` nor `helper(x, x + n, n)`). A helper
whose address is taken, or that is called from outside the scope, stays out, with the
reason.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kernelcrew.csource.affine import FunctionModel
from kernelcrew.csource.syntax import (
    Node,
    Source,
    find_function,
    function_name,
    functions,
    lookup,
    params,
    walk,
)

MAX_HELPERS = 8


@dataclass
class Scope:
    """The functions in scope (entry first) and why other called functions are not."""

    functions: list[str] = field(default_factory=list)
    excluded: dict[str, str] = field(default_factory=dict)  # helper -> reason


def _calls(s: Source, fn: Node, defined: set[str]) -> list[tuple[str, Node]]:
    out = []
    for n in walk(fn):
        if n.type == "call_expression":
            name = s.text_of(n.child_by_field_name("function")).strip()
            if name in defined:
                out.append((name, n))
    return out


def _uses_as_value(s: Source, name: str, defined_fns: list[Node]) -> bool:
    """The function's name appears other than as the callee of a call (a function pointer)."""
    for fn in defined_fns:
        for n in walk(fn):
            if n.type != "identifier" or n.text.decode() != name:
                continue
            p = n.parent
            if p is not None and p.type == "call_expression" and \
                    p.child_by_field_name("function") == n:
                continue
            if p is not None and p.type == "function_declarator":
                continue
            return True
    return False


_CXX_CASTS = ("const_cast", "static_cast", "reinterpret_cast")


def _cxx_cast_operand(node: Node) -> Node | None:
    """`const_cast<float*>(x)` (a C++ cast, a call to tree-sitter): its operand, else None.
    `kernelcrew import` passes the harness's `const float*` inputs to code that takes
    `float*` this way."""
    if node.type != "call_expression":
        return None
    fn = node.child_by_field_name("function")
    name = fn.text.decode().split("<", 1)[0].strip() if fn is not None else ""
    args = node.child_by_field_name("arguments")
    if name in _CXX_CASTS and args is not None and len(args.named_children) == 1:
        return args.named_children[0]
    return None


def _strip_casts(node: Node) -> Node:
    while True:
        if node.type == "cast_expression":
            inner = node.child_by_field_name("value")
        elif node.type == "parenthesized_expression":
            inner = node.named_children[0] if len(node.named_children) == 1 else None
        else:
            inner = _cxx_cast_operand(node)
        if inner is None:
            return node
        node = inner


def _pointer_args_distinct(s: Source, caller: FunctionModel, call: Node, callee: Node
                           ) -> str | None:
    """None when the pointer arguments of `call` reach distinct buffers, else why not."""
    args = call.child_by_field_name("arguments").named_children
    ptr_params = [i for i, p in enumerate(params(callee)) if p.pointer is not None]
    roots: dict[str, int] = {}
    line = s.line_of(call)
    for i in ptr_params:
        if i >= len(args):
            return f"the call at line {line} passes fewer arguments than the helper takes"
        a = _strip_casts(args[i])
        if a.type in ("null", "nullptr") or (a.type == "number_literal" and a.text == b"0") or \
                (a.type == "identifier" and a.text.decode() == "NULL"):
            continue
        got = caller.pointer_root(a, caller.body)
        if got is None:
            return (f"cannot tell which buffer argument {i + 1} of the call at line {line} "
                    f"({s.text_of(args[i])}) points into")
        root = got[0]
        if root in roots:
            return (f"the call at line {line} passes the buffer "
                    f"{root.split('@')[0]} twice (arguments {roots[root] + 1} and {i + 1}): "
                    "its pointers may overlap")
        d = lookup(root.split("@")[0], a)
        if d is not None and not d.param:
            return (f"argument {i + 1} of the call at line {line} points into a local "
                    f"array ({root.split('@')[0]})")
        roots[root] = i
    return None


def scope_of(src: Source, entry: str) -> Scope:
    """The entry and the helpers it calls (transitively) that the transformations may work
    on: defined in this file, called only from functions in scope, with distinct buffers."""
    out = Scope()
    fn = find_function(src, entry)
    if fn is None:
        return out
    fns = functions(src)
    by_name: dict[str, Node] = {}
    for f in fns:
        n = function_name(f)
        if n is not None and f.child_by_field_name("body") is not None:
            by_name.setdefault(n, f)
    defined = set(by_name)
    out.functions.append(entry)
    # who calls whom
    callers: dict[str, list[tuple[str, Node]]] = {}
    for name, f in by_name.items():
        for callee, call in _calls(src, f, defined):
            callers.setdefault(callee, []).append((name, call))
    frontier = [entry]
    while frontier and len(out.functions) <= MAX_HELPERS:
        cur = frontier.pop(0)
        for callee, _ in _calls(src, by_name[cur], defined):
            if callee in out.functions or callee in out.excluded or callee == entry:
                continue
            reason = None
            if _uses_as_value(src, callee, fns):
                reason = "its address is taken"
            elif any(c == callee for c, _ in callers.get(callee, [])):
                reason = "it calls itself"
            for who, call in callers.get(callee, []):
                if reason is not None:
                    break
                if who not in out.functions:
                    reason = f"it is also called from {who}()"
                    break
                reason = _pointer_args_distinct(src, FunctionModel(src, by_name[who]), call,
                                                by_name[callee])
            if reason is not None:
                out.excluded[callee] = reason
                continue
            out.functions.append(callee)
            frontier.append(callee)
    return out
