"""Function-like macros expanded in the entry's body, as the preprocessor would.

C code reaches its arrays through indexing macros (`#define U(i, j) u[(i) * nx + (j)]`,
`V(i, j) = c0 * U(i, j) + ...`). A macro invocation looks like a call to the analysis, so a
write through one cannot be proven to touch one element, and a read through one names no
array at all. Expanded (the macro's replacement text with the arguments put in for its
parameters, token for token, no parentheses added; a parenthesized parameter whose argument is
a variable or a number loses its parentheses, which mean nothing there and would make
`(x) + n` read as a cast), the subscripts are plain again. The
definitions stay; only the entry's uses are replaced. Macros whose body stringizes or
pastes tokens (`#`, `##`), takes a variable number of arguments or holds string literals
are left alone.
"""

from __future__ import annotations

import re

from kernelcrew.agents.transforms.analysis.common import finish
from kernelcrew.csource.syntax import Edit, Source, find_function, lookup, walk
from kernelcrew.kernels.text import split_top


def _definitions(s: Source) -> dict[str, tuple[list[str], str]]:
    out: dict[str, tuple[list[str], str]] = {}
    for n in walk(s.root):
        if n.type != "preproc_function_def":
            continue
        name, body = n.child_by_field_name("name"), n.child_by_field_name("value")
        ps = n.child_by_field_name("parameters")
        if name is None or ps is None:
            continue
        text = s.text_of(body).strip() if body is not None else ""
        args = [c.text.decode() for c in ps.named_children]
        if "#" in text or '"' in text or "'" in text or "..." in s.text_of(ps) or \
                any(not re.fullmatch(r"[A-Za-z_]\w*", a) for a in args):
            continue
        out[name.text.decode()] = (args, text)
    return out


def _arguments(text: str) -> list[str]:
    """The arguments of `(a, b[i, j], (T)c)` as the preprocessor splits them: at the commas
    outside parentheses and brackets (a type name such as `float` is an argument too,
    though it is no expression)."""
    inner = text.strip()[1:-1]
    return [a.strip() for a in split_top(inner)] if inner.strip() else []


def _once(src: str, entry: str) -> str | None:
    s = Source(src)
    fn = find_function(s, entry)
    defs = _definitions(s)
    if fn is None or not defs:
        return None
    edits = []
    for n in walk(fn):
        if n.type != "call_expression":
            continue
        f = n.child_by_field_name("function")
        name = s.text_of(f).strip()
        if f.type != "identifier" or name not in defs:
            continue
        if any(e.start <= n.start_byte < e.end for e in edits):
            continue  # inside a macro call already expanded in this pass
        params, body = defs[name]
        args = _arguments(s.text_of(n.child_by_field_name("arguments")))
        if len(args) != len(params):
            continue
        table = dict(zip(params, args, strict=True))
        # `(p)` with a variable or a number for p is written without the parentheses:
        # `((x) + (size_t)(r) * (n))` would read as a cast of `+ ...` to the type `x`
        plain = {p for p, a in table.items() if re.fullmatch(r"\s*\d[\w.]*\s*", a) or (
            re.fullmatch(r"\s*[A-Za-z_]\w*\s*", a) and lookup(a.strip(), n) is not None)}
        if plain:
            body = re.sub(r"\(\s*([A-Za-z_]\w*)\s*\)",
                          lambda m, pl=plain: m.group(1) if m.group(1) in pl else m.group(0),
                          body)
        text = re.sub(r"\b[A-Za-z_]\w*\b", lambda m, tb=table: tb.get(m.group(0), m.group(0)),
                      body) if table else body
        edits.append(Edit(n.start_byte, n.end_byte, text))
    return finish(s, edits)


def expand_macros(src: str, entry: str, limit: int = 4) -> str | None:
    """The source with the function-like macro invocations in `entry` expanded; None when
    there are none."""
    out = None
    for _ in range(limit):
        new = _once(out if out is not None else src, entry)
        if new is None:
            break
        out = new
    return out
