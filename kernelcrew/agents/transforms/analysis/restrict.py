"""`__restrict__` on the pointer parameters of a function: the restrict move, and the
first step of the CUDA ldg move."""

from __future__ import annotations

from kernelcrew.agents.transforms.analysis.common import finish
from kernelcrew.csource.syntax import Edit, Source, find_function, params


def add_restrict(src: str, entry: str) -> str | None:
    """Add `__restrict__` to every pointer parameter of `entry` (distinct buffers)."""
    s = Source(src)
    fn = find_function(s, entry)
    if fn is None:
        return None
    edits = []
    for p in params(fn):
        if p.pointer is None or p.restrict:
            continue
        star = next((c for c in p.pointer.children if c.type == "*"), None)
        if star is None:
            continue
        edits.append(Edit(star.end_byte, star.end_byte, " __restrict__"))
        # `float *x` style: keep one space between the qualifier and the name
        nxt = s.data[star.end_byte:star.end_byte + 1]
        if nxt not in (b" ", b"\t"):
            edits[-1] = Edit(star.end_byte, star.end_byte, " __restrict__ ")
    return finish(s, edits)
