"""Which code regions a change touched: the coordinator merges proposals whose regions
do not overlap, and a proposal names its regions for the LLM critic."""

from __future__ import annotations

import difflib

from kernelcrew.agents.transforms.kernel_files import parse_any
from kernelcrew.csource.syntax import Source, all_loops, functions, loops_in
from kernelcrew.errors import InputError


def changed_regions(base_text: str, new_text: str) -> list[str]:
    """Which code regions a change touched, for the coordinator's conflict check:
    `loop@LINE` (LINE of the loop's `for` in the base file) for a loop whose lines changed or
    that got lines inserted before it (pragmas) or after its body (a versioned copy),
    `fn@LINE` for a function's other lines. Re-indentation alone is not a change."""
    try:
        base, new = parse_any(base_text), parse_any(new_text)
    except InputError:
        return []
    offset = base_text[: len(base_text) - len(base.body)].count("\n")
    a = [ln.strip() for ln in base.body.splitlines()]
    b = [ln.strip() for ln in new.body.splitlines()]
    s = Source(base.body)
    spans: list[tuple[str, int, int]] = []
    for fn in functions(s):
        body = fn.child_by_field_name("body")
        if body is not None:  # the declarator, up to the line with the body's `{`
            spans.append(("signature", fn.start_point.row, body.start_point.row))
        spans.append(("fn", fn.start_point.row, fn.end_point.row))
        if body is not None:
            for lp in all_loops(loops_in(body)):
                spans.append(("loop", lp.node.start_point.row, lp.node.end_point.row))

    def innermost(row: int) -> tuple[str, int, int] | None:
        best = None
        for sp in spans:
            if sp[1] <= row <= sp[2] and (best is None or sp[2] - sp[1] <= best[2] - best[1]):
                best = sp
        return best

    hits: list[tuple[str, int, int]] = []
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(a=a, b=b, autojunk=False).get_opcodes():
        if op == "equal":
            continue
        if all(ln in ("", "}", "{") for ln in a[i1:i2] + b[j1:j2]):
            continue  # braces moved around a rewritten block: not a region of its own
        if op == "insert":
            starting = [sp for sp in spans if sp[0] == "loop" and sp[1] == i1]
            if starting:  # lines put right before a loop: its pragmas or its versioning
                hits.append(max(starting, key=lambda sp: sp[2] - sp[1]))
                continue
            where = innermost(i1 - 1) if i1 > 0 else None
            if where is not None:
                hits.append(where)
            continue
        for row in range(i1, i2):
            where = innermost(row)
            if where is not None:
                hits.append(where)
    out: list[str] = []
    for kind, r0, _r1 in hits:
        tag = f"{kind}@{r0 + 1 + offset}"
        if tag not in out:
            out.append(tag)
    return out
