"""The shape groups of an imported operator: the typical cases given, boundary cases
(small sizes in the same order) and an unaligned one (even sizes made odd). An integer
parameter the function reads only as a condition (`if (trans_A)`, `!a && b`,
`mode == 1`, a `switch`) is a mode, not a size: every generated case keeps the value the
typical case gives, since another value can take a path the function does not have
(a BLAS-like `abort()` for a transpose combination it lacks)."""

from __future__ import annotations

from kernelcrew.kernels.importer.source import Node, walk


def boundary_cases(case: dict[str, int], keep: frozenset[str] = frozenset()
                   ) -> list[dict[str, int]]:
    """Small cases with the same order relations between sizes as `case` (ranks), and odd
    ones: a kernel that assumes `V <= Vp` still gets sizes that honour it. `keep`: modes,
    left as they are."""
    vals = sorted({v for k, v in case.items() if k not in keep})
    rank = {v: i + 1 for i, v in enumerate(vals)}
    a = {k: v if k in keep else rank[v] for k, v in case.items()}
    b = {k: v if k in keep else 2 * rank[v] + 1 for k, v in case.items()}
    out = [a]
    if b != a:
        out.append(b)
    return out


def unaligned_cases(cases: list[dict[str, int]], keep: frozenset[str] = frozenset()
                    ) -> list[dict[str, int]]:
    small = min(cases, key=lambda c: sum(v for k, v in c.items() if k not in keep))
    odd = {k: v - 1 if k not in keep and v > 2 and v % 2 == 0 else v
           for k, v in small.items()}
    return [odd]


def _dedupe(cases: list[dict[str, int]], seen: list[dict[str, int]]) -> list[dict[str, int]]:
    out = []
    for c in cases:
        if c not in seen and c not in out:
            out.append(c)
    return out


def groups_of(cases: list[dict[str, int]], modes: frozenset[str] = frozenset()
              ) -> dict[str, list[dict[str, int]]]:
    boundary = _dedupe([c for t in cases[:1] for c in boundary_cases(t, modes)], cases)
    return {"typical": cases, "boundary": boundary,
            "unaligned": _dedupe(unaligned_cases(cases, modes), cases + boundary)}


def modes(fn: Node, data: bytes, names: set[str]) -> frozenset[str]:
    """The parameters among `names` that `fn` (a function_definition) reads, and reads only
    as conditions: the condition of an `if`, `?:`, loop or `switch`, an operand of `!`,
    `&&`, `||`, or compared for equality with a literal."""
    body = fn.child_by_field_name("body")
    if body is None:
        return frozenset()
    used: set[str] = set()
    other: set[str] = set()
    for n in walk(body):
        if n.type != "identifier":
            continue
        name = data[n.start_byte:n.end_byte].decode()
        if name in names:
            used.add(name)
            if not _condition(n, data):
                other.add(name)
    return frozenset(used - other)


def _condition(n: Node, data: bytes) -> bool:
    p = n.parent
    while p is not None:
        if p.type == "parenthesized_expression" or p.type == "condition_clause" or (
                p.type == "unary_expression" and _op(p, data) == "!"):
            n, p = p, p.parent
            continue
        if p.type == "binary_expression" and _op(p, data) in ("&&", "||"):
            return True
        if p.type == "binary_expression" and _op(p, data) in ("==", "!="):
            other = p.child_by_field_name("right") if p.child_by_field_name("left") == n \
                else p.child_by_field_name("left")
            return other is not None and other.type in ("number_literal", "char_literal")
        if p.type in ("if_statement", "while_statement", "do_statement", "switch_statement",
                      "conditional_expression", "for_statement"):
            return p.child_by_field_name("condition") == n
        return False
    return False


def _op(n: Node, data: bytes) -> str:
    op = n.child_by_field_name("operator")
    return data[op.start_byte:op.end_byte].decode() if op is not None else ""
