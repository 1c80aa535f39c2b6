"""Comparisons the C++ grammar reads as template arguments, made unambiguous.

The parser is C++'s, and in C++ `a < b || a >= c` may be a template: `a<b || a>` applied
to `= c`. Code written as C tests its bounds exactly so,

    dst[x] = (src < 0 || src >= cols) ? 0.0f : row[src];

and every move then sees an assignment where the test is. Where the would-be template's
name is a variable in scope (no template is called `src`), the view writes that name in
parentheses, `(src) < 0 || src >= cols`, which no grammar reads as a template; nothing
else changes, and the value is the same."""

from __future__ import annotations

from kernelcrew.csource.syntax import Edit, Source, apply_edits, find_function, lookup, walk


def unmask_comparisons(src: str, entry: str) -> str | None:
    """`entry` with each variable the parser took for a template's name parenthesized;
    None where there is none."""
    text = src
    for _ in range(8):  # a fixed name can uncover another comparison read as a template
        s = Source(text)
        fn = find_function(s, entry)
        if fn is None:
            return None
        edits = []
        for n in walk(fn):
            name = n.child_by_field_name("name") if n.type == "template_function" else None
            if name is not None and name.type == "identifier" and \
                    lookup(name.text.decode(), name) is not None:
                edits.append(Edit(name.start_byte, name.end_byte, f"({name.text.decode()})"))
        if not edits:
            break
        text = apply_edits(s, edits)
    return text if text != src else None
