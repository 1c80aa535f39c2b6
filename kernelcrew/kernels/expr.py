"""A safe evaluator for the integer expressions of op.yaml and kernel files.

Accepted: integer literals, names of sizes and knobs, `+ - * // % ( )`, unary minus,
and the calls `min`, `max`, `ceil_div`. Everything else (attributes, subscripts,
strings, other calls, floats) is refused before anything is evaluated.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Mapping

from kernelcrew.errors import ExprError

_BINOPS = {
    ast.Add: lambda a, b: a + b,
    ast.Sub: lambda a, b: a - b,
    ast.Mult: lambda a, b: a * b,
    ast.FloorDiv: lambda a, b: a // b,
    ast.Mod: lambda a, b: a % b,
}


_INT_SUFFIX = re.compile(r"\b(\d+)[uUlL]+\b")


def without_int_suffixes(text: str) -> str:
    """C's integer literals as plain numbers: `1U`, `0x4UL`'s digits, `16LL` -> `1`, `16`."""
    return _INT_SUFFIX.sub(r"\1", text)


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


_CALLS = {"min": min, "max": max, "ceil_div": _ceil_div}


def parse_expr(text: str | int) -> ast.expr:
    """Parse and validate an expression; raise ExprError naming what is not allowed."""
    if isinstance(text, bool):
        raise ExprError(f"expected an integer expression, got {text!r}")
    if isinstance(text, int):
        return ast.Constant(text)
    if not isinstance(text, str):
        raise ExprError(f"expected an integer expression, got {type(text).__name__} {text!r}")
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except SyntaxError:
        raise ExprError(f"cannot parse expression {text!r}") from None
    for node in ast.walk(tree):
        if isinstance(node, ast.Expression | ast.Load | ast.Name | ast.operator | ast.unaryop):
            if isinstance(node, ast.operator) and type(node) not in _BINOPS:
                raise ExprError(f"operator {type(node).__name__} not allowed in {text!r}")
            if isinstance(node, ast.unaryop) and not isinstance(node, ast.USub | ast.UAdd):
                raise ExprError(f"operator {type(node).__name__} not allowed in {text!r}")
            continue
        if isinstance(node, ast.BinOp | ast.UnaryOp):
            continue
        if isinstance(node, ast.Constant) and type(node.value) is int:
            continue
        if isinstance(node, ast.Call):
            if not isinstance(node.func, ast.Name) or node.func.id not in _CALLS:
                raise ExprError(
                    f"calling {ast.unparse(node.func)!r} is not allowed (in {text!r}); only min, "
                    "max and ceil_div may be called"
                )
            if node.keywords:
                raise ExprError(f"keyword arguments not allowed in {text!r}")
            continue
        raise ExprError(f"{ast.unparse(node)!r} is not allowed in an expression ({text!r}): "
                        "use integers, size and knob names, + - * // % ( ), min, max, ceil_div")
    return tree.body


def names_in(text: str | int) -> set[str]:
    """The size/knob names an expression refers to (call names excluded)."""
    tree = parse_expr(text)
    calls = {id(n.func) for n in ast.walk(tree) if isinstance(n, ast.Call)}
    return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and id(n) not in calls}


def evaluate(text: str | int, env: Mapping[str, int]) -> int:
    """Evaluate an expression with the given size/knob values."""
    tree = parse_expr(text)

    def ev(node: ast.expr) -> int:
        if isinstance(node, ast.Constant):
            return int(node.value)
        if isinstance(node, ast.Name):
            if node.id not in env:
                raise ExprError(f"unknown name {node.id!r} in {text!r}; known: {sorted(env)}")
            return int(env[node.id])
        if isinstance(node, ast.UnaryOp):
            v = ev(node.operand)
            return -v if isinstance(node.op, ast.USub) else v
        if isinstance(node, ast.BinOp):
            a, b = ev(node.left), ev(node.right)
            if isinstance(node.op, ast.FloorDiv | ast.Mod) and b == 0:
                raise ExprError(f"division by zero in {text!r} with {dict(env)}")
            return _BINOPS[type(node.op)](a, b)
        if isinstance(node, ast.Call):
            return _CALLS[node.func.id](*[ev(a) for a in node.args])  # type: ignore[union-attr]
        raise ExprError(f"cannot evaluate {ast.unparse(node)!r}")  # unreachable after parse_expr

    return ev(tree)
