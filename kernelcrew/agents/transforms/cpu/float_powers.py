"""Strength reduction: `pow(x, 2)` of a float, computed in float.

C's `pow` takes and returns double, and so does C++'s `pow(float, int)`: code that squares a
float deviation and adds it to a float sum,

    variance[i] += pow((x[index] - mean[i]), 2);

converts every element to double, squares it there and converts the sum back. g++ folds the
call to a multiply, but the conversions stay: a vector loop then runs at half the width (or
not at all), for a square whose float result is all the code keeps. The move writes the
product in the operand's own type:

    variance[i] += ((x[index] - mean[i]) * (x[index] - mean[i]));

The square is then rounded to float before it is added (the double square of a float is
exact, so the code as written rounds once, in the addition): a difference of an ulp of the
square, inside any float tolerance, which the correctness check judges as it judges every
change.

Taken where the exponent is the literal 2 or 3, the base is a float expression (float
variables, elements of float arrays, float literals and integers, no double and no call,
so it can be written twice), and the result goes where it becomes float anyway: assigned,
added or multiplied into a float (`=`, `+=`, `-=`, `*=`), a float declaration's initial
value, or a float function's return value, through operators whose other operands are
float or integer too. A double anywhere on that way (a double accumulator, a double
literal) keeps the call.
"""

from __future__ import annotations

from kernelcrew.agents.transforms.analysis.common import finish, model_of
from kernelcrew.agents.transforms.analysis.types import INTEGERS, decl_type, resolve
from kernelcrew.csource.syntax import Edit, Node, Source, lookup, unparen, walk

_POW = ("pow", "std::pow", "::pow")
_EXPONENTS = {"2": 2, "2.0": 2, "2.": 2, "2.f": 2, "2.0f": 2, "2.F": 2, "2.0F": 2,
              "3": 3, "3.0": 3, "3.": 3, "3.f": 3, "3.0f": 3, "3.F": 3, "3.0F": 3}
_ARITH_OPS = ("+", "-", "*", "/")
_FLOAT_CALLS = frozenset({"sqrtf", "fabsf", "expf", "logf", "tanhf", "fminf", "fmaxf"})


def _kind(type_text: str | None) -> str | None:
    """`float`, `double` or `int` for an arithmetic type, None for anything else."""
    if type_text in ("float", "double"):
        return type_text
    return "int" if type_text in INTEGERS else None


def _element_kind(s: Source, n: Node) -> str | None:
    """The kind of `a[i]`, `a[i][j]` or `*p`: the element type of the array or pointer."""
    root = n
    while root.type in ("subscript_expression", "pointer_expression"):
        if root.type == "pointer_expression" and root.child_by_field_name("operator").type != "*":
            return None
        root = unparen(root.child_by_field_name("argument"))
    if root.type != "identifier":
        return None
    d = lookup(root.text.decode(), root)
    if d is None or not (d.pointer or d.array):
        return None
    return _kind(decl_type(s, d.node))


def kind_of(s: Source, n: Node, *, calls: bool = True) -> str | None:
    """`float`, `double` or `int`: the type of an arithmetic expression as C types it, or
    None where it cannot be told. `calls=False`: None for any call (an expression that will
    be written twice)."""
    n = unparen(n)
    t = n.type
    if t == "number_literal":
        text = n.text.decode().lower()
        if text.startswith("0x"):
            return "int"
        if "." in text or "e" in text:
            return "float" if text.endswith("f") else "double"
        return "int"
    if t == "identifier":
        d = lookup(n.text.decode(), n)
        if d is None or d.pointer or d.array:
            return None
        return _kind(decl_type(s, d.node))
    if t in ("subscript_expression", "pointer_expression"):
        return _element_kind(s, n)
    if t == "unary_expression" and n.child_by_field_name("operator").type in ("-", "+"):
        return kind_of(s, n.child_by_field_name("argument"), calls=calls)
    if t == "binary_expression" and n.child_by_field_name("operator").type in _ARITH_OPS:
        kinds = {kind_of(s, n.child_by_field_name(side), calls=calls)
                 for side in ("left", "right")}
        if None in kinds:
            return None
        return "double" if "double" in kinds else "float" if "float" in kinds else "int"
    if t == "cast_expression":
        ty = n.child_by_field_name("type")
        return _kind(resolve(s, s.text_of(ty))) if ty is not None else None
    if t == "call_expression" and calls:
        fn = s.text_of(n.child_by_field_name("function")).replace("std::", "")
        if fn in _FLOAT_CALLS:
            return "float"
        return "float" if _float_power(s, n) is not None else None  # rewritten as well
    return None


def _float_destination(s: Source, call: Node) -> bool:
    """The call's value becomes float where it goes: up through parentheses and arithmetic
    whose other operands are float or integer, into a float assignment, declaration or
    return."""
    n = call
    while True:
        p = n.parent
        if p is None:
            return False
        if p.type == "parenthesized_expression":
            n = p
            continue
        if p.type == "binary_expression" and p.child_by_field_name("operator").type in _ARITH_OPS:
            other = p.child_by_field_name("right" if n == p.child_by_field_name("left")
                                          else "left")
            if kind_of(s, other) not in ("float", "int"):
                return False
            n = p
            continue
        if p.type == "assignment_expression":
            if n != p.child_by_field_name("right") or \
                    p.child_by_field_name("operator").type not in ("=", "+=", "-=", "*="):
                return False
            return kind_of(s, p.child_by_field_name("left")) == "float"
        if p.type == "init_declarator":
            decl = p.parent
            return decl is not None and decl.type == "declaration" and \
                decl_type(s, decl) == "float" and p.child_by_field_name("value") == n and \
                p.child_by_field_name("declarator").type == "identifier"
        if p.type == "return_statement":
            fn = p.parent
            while fn is not None and fn.type != "function_definition":
                fn = fn.parent
            ty = fn.child_by_field_name("type") if fn is not None else None
            declarator = fn.child_by_field_name("declarator") if fn is not None else None
            return ty is not None and declarator is not None and \
                declarator.type == "function_declarator" and \
                resolve(s, s.text_of(ty)) == "float"
        return False


def _site(s: Source, n: Node) -> tuple[str, int] | None:
    """(the base's text, the exponent) of a `pow` call the move rewrites, else None."""
    got = _float_power(s, n)
    return got if got is not None and _float_destination(s, n) else None


def _float_power(s: Source, n: Node) -> tuple[str, int] | None:
    """(the base's text, the exponent) of `pow(float, 2 or 3)`, wherever it goes."""
    if n.type != "call_expression":
        return None
    fn = n.child_by_field_name("function")
    args = n.child_by_field_name("arguments")
    if fn is None or args is None or s.text_of(fn).replace(" ", "") not in _POW or \
            len(args.named_children) != 2:
        return None
    base, exp = args.named_children
    power = _EXPONENTS.get(exp.text.decode()) if exp.type == "number_literal" else None
    if power is None or kind_of(s, base, calls=False) != "float":
        return None
    return s.text_of(unparen(base)), power


def float_powers(src: str, entry: str) -> str | None:
    """`pow(x, 2)` and `pow(x, 3)` of a float whose result becomes float, in `entry`, as a
    product in float."""
    got = model_of(src, entry)
    if got is None:
        return None
    s, m = got
    edits = []
    for n in walk(m.fn):
        site = _site(s, n)
        if site is not None:
            base, power = site
            edits.append(Edit(n.start_byte, n.end_byte,
                              "(" + " * ".join([f"({base})"] * power) + ")"))
    return finish(s, edits) if edits else None
