"""The same function written the way the loop moves read best: counters declared at the
top moved into their loops (`counters`), indexing macros expanded (`macros`), counted
`while` loops written as `for` loops (`whiles`), helpers called in loops inlined (`inline`), pointer walks turned into subscripts (`pointers`),
array elements used as accumulators kept in locals (`scalarize`). A move that does not
apply to the source as written is tried on these views, so a nest split across a call or
walked with `*p++` is still seen whole; the result is the view with the move applied."""

from __future__ import annotations

from collections.abc import Callable

from kernelcrew.agents.transforms.views.counted_whiles import counted_whiles
from kernelcrew.agents.transforms.views.expand_macros import expand_macros
from kernelcrew.agents.transforms.views.inline_helpers import inline_calls
from kernelcrew.agents.transforms.views.loop_counters import scope_counters
from kernelcrew.agents.transforms.views.pointer_walks import index_pointers
from kernelcrew.agents.transforms.views.reroll import reroll
from kernelcrew.agents.transforms.views.scalarize import scalarize


def views(src: str, entry: str) -> list[str]:
    """The rewritten views of `entry` that differ from `src`, each step on the one before:
    counters scoped, macros expanded, counted whiles made for loops, helpers inlined, pointer
    walks indexed, then array accumulators scalarized."""
    out: list[str] = []
    cur = src
    for step in (scope_counters, reroll, expand_macros, counted_whiles, inline_calls,
                 index_pointers, scalarize):
        new = step(cur, entry)
        if new is not None and new != cur:
            cur = new
            out.append(cur)
    return out


def preferred(src: str, entry: str) -> str:
    """The view the loop moves read first: the code with its counters scoped and its
    hand-unrolled loops rolled back, both rewrites that change nothing it computes."""
    scoped = scope_counters(src, entry) or src
    return reroll(scoped, entry) or scoped


def canonical(src: str, entry: str) -> str:
    """The most rewritten view (the source itself when none applies)."""
    vs = views(src, entry)
    return vs[-1] if vs else src


def through_views(transform: Callable[..., str | None]) -> Callable[..., str | None]:
    """`transform(src, entry, ...)`, or, where it does not apply, the same on the first
    view it applies to."""
    def run(src: str, entry: str, *args, **kwargs):
        # first the same code written plainer: counters declared at the top scoped into
        # their loops (`int i, j;` with j written in every row keeps the rows from being
        # threaded while j's loop still could be) and hand-unrolled loops rolled back (a
        # loop stepping by 5 is vectorized with strided loads, and nothing else takes it)
        plain = preferred(src, entry)
        if plain != src:
            out = transform(plain, entry, *args, **kwargs)
            if out is not None:
                return out
        out = transform(src, entry, *args, **kwargs)
        if out is not None:
            return out
        for v in views(src, entry):
            out = transform(v, entry, *args, **kwargs)
            if out is not None:
                return out
        return None

    run.__name__ = getattr(transform, "__name__", "transform")
    run.__doc__ = transform.__doc__
    return run
