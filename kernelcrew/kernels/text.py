"""Small text helpers shared by the parsers of kernel files, imports and transforms."""

from __future__ import annotations

_CLOSE = {"(": ")", "[": "]", "{": "}", "<": ">"}


def split_top(text: str, brackets: str = "([{") -> list[str]:
    """`text` split at the commas outside the bracket pairs whose openers `brackets` names
    (add "<" for C++ template arguments; leave it out where `<` may be a comparison), the
    parts as written: `f(a, b), c[1, 2]` -> [`f(a, b)`, ` c[1, 2]`]."""
    opens = set(brackets)
    closes = {_CLOSE[b] for b in brackets}
    parts, depth, cur = [], 0, []
    for ch in text:
        if ch in opens:
            depth += 1
        elif ch in closes:
            depth -= 1
        if ch == "," and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    parts.append("".join(cur))
    return parts
