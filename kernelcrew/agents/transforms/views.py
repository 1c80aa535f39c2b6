"""The same function written the way the loop moves read best: counters declared at the
top moved into their loops (`counters`), indexing macros expanded (`macros`), helpers
called in loops inlined (`inline`), pointer walks turned into subscripts (`pointers`),
array elements used as accumulators kept in locals (`scalarize`). A move that does not
apply to the source as written is tried on these views, so a nest split across a call or
walked with `*p++` is still seen whole; the result is the view with the move applied."""

from __future__ import annotations

from collections.abc import Callable

from kernelcrew.agents.transforms.counters import scope_counters
from kernelcrew.agents.transforms.inline import inline_calls
from kernelcrew.agents.transforms.macros import expand_macros
from kernelcrew.agents.transforms.pointers import index_pointers
from kernelcrew.agents.transforms.scalarize import scalarize


def views(src: str, entry: str) -> list[str]:
    """The rewritten views of `entry` that differ from `src`, each step on the one before:
    counters scoped, macros expanded, helpers inlined, pointer walks indexed, then array
    accumulators scalarized."""
    out: list[str] = []
    cur = src
    for step in (scope_counters, expand_macros, inline_calls, index_pointers, scalarize):
        new = step(cur, entry)
        if new is not None and new != cur:
            cur = new
            out.append(cur)
    return out


def canonical(src: str, entry: str) -> str:
    """The most rewritten view (the source itself when none applies)."""
    vs = views(src, entry)
    return vs[-1] if vs else src


def through_views(transform: Callable[..., str | None]) -> Callable[..., str | None]:
    """`transform(src, entry, ...)`, or, where it does not apply, the same on the first
    view it applies to."""
    def run(src: str, entry: str, *args, **kwargs):
        # counters declared at the top scoped into their loops first: the same code, and
        # the loops' iterations no longer share a counter (`int i, j;` with j written in
        # every row would keep the rows from being threaded while j's loop still could be)
        scoped = scope_counters(src, entry)
        if scoped is not None and scoped != src:
            out = transform(scoped, entry, *args, **kwargs)
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
