"""The shape groups of an imported operator: the typical cases given, boundary cases
(small sizes in the same order) and an unaligned one (even sizes made odd)."""

from __future__ import annotations


def boundary_cases(case: dict[str, int]) -> list[dict[str, int]]:
    """Small cases with the same order relations between sizes as `case` (ranks), and odd
    ones: a kernel that assumes `V <= Vp` still gets sizes that honour it. A value of 0 or
    1 stays: it is a flag or a mode (`trans_A=0`) as often as a size, and another value
    can take a path the function does not have (sgemm's `abort()` for both transposed)."""
    vals = sorted({v for v in case.values() if v > 1})
    first = 2 if 1 in case.values() else 1  # above a kept 1: the order still holds
    rank = {v: i + first for i, v in enumerate(vals)}
    a = {k: rank.get(v, v) for k, v in case.items()}
    b = {k: 2 * rank[v] + 1 if v in rank else v for k, v in case.items()}
    out = [a]
    if b != a:
        out.append(b)
    return out


def unaligned_cases(cases: list[dict[str, int]]) -> list[dict[str, int]]:
    small = min(cases, key=lambda c: sum(c.values()))
    odd = {k: v - 1 if v > 2 and v % 2 == 0 else v for k, v in small.items()}
    return [odd]


def _dedupe(cases: list[dict[str, int]], seen: list[dict[str, int]]) -> list[dict[str, int]]:
    out = []
    for c in cases:
        if c not in seen and c not in out:
            out.append(c)
    return out


def groups_of(cases: list[dict[str, int]]) -> dict[str, list[dict[str, int]]]:
    boundary = _dedupe([c for t in cases[:1] for c in boundary_cases(t)], cases)
    return {"typical": cases, "boundary": boundary,
            "unaligned": _dedupe(unaligned_cases(cases), cases + boundary)}
