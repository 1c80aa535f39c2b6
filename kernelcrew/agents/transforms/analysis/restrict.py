"""`__restrict__` on the pointer parameters of a function: the restrict move, and the
first step of the CUDA ldg move."""

from __future__ import annotations

import re

from kernelcrew.agents.transforms.analysis.common import finish, written_names
from kernelcrew.csource.masking import restrict_macros
from kernelcrew.csource.syntax import Edit, Node, Source, find_function, params


def reassigned(fn: Node) -> set[str]:
    """The parameters the function assigns (`tmp = in; in = out; out = tmp;` between time
    steps): one then points at the other's buffer, which restrict says it never does."""
    body = fn.child_by_field_name("body")
    return written_names(body) if body is not None else set()


def add_restrict(src: str, entry: str) -> str | None:
    """Add `__restrict__` to every pointer parameter of `entry` (distinct buffers) that
    the function does not assign."""
    s = Source(src)
    fn = find_function(s, entry)
    if fn is None:
        return None
    edits = []
    moved = reassigned(fn)
    # `float * MY_RESTRICT x`: the macro (blanked for the parser) is the qualifier already
    already = restrict_macros(src)
    for p in params(fn):
        if p.pointer is None or p.restrict or p.name in moved:
            continue
        star = next((c for c in p.pointer.children if c.type == "*"), None)
        if star is None:
            continue
        if already and set(re.findall(r"\w+", s.data[star.end_byte:p.pointer.end_byte]
                                      .decode())) & already:
            continue
        edits.append(Edit(star.end_byte, star.end_byte, " __restrict__"))
        # `float *x` style: keep one space between the qualifier and the name
        nxt = s.data[star.end_byte:star.end_byte + 1]
        if nxt not in (b" ", b"\t"):
            edits[-1] = Edit(star.end_byte, star.end_byte, " __restrict__ ")
    return finish(s, edits)
