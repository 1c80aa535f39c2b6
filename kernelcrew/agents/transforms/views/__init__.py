"""Views: the same function written the way the loop moves read best. Each view is one
module with a function `(source, entry) -> source | None` that changes nothing the code
computes, listed once in VIEWS:

- `active_branches`: inside the function, the `#if` branches the kernel compiles alone
  (the others set aside as markers, put back into a move's result);
- `comparisons`: a variable C++'s grammar takes for a template's name (`a < b || a >= c`)
  parenthesized, so the comparisons read as comparisons;
- `split_comma_walks` (pointer_walks.py): a pointer a `for` steps beside its counter
  (`for (j = 0, p = b; j < n; ++j, p += ld)`) computed from the counter in the body;
- `loop_counters`: counters declared at the top moved into the loops that assign them, and
  plain locals each loop sets first declared where it sets them (`scope_scalars`);
- `reroll`: loops unrolled by hand rolled back;
- `expand_macros`: indexing macros expanded as the preprocessor would;
- `counted_whiles`: counted `while` loops written as `for` loops;
- `inline_helpers`: pure helpers called inside loops inlined;
- `pointer_walks`: pointer walks (`*dst++ = f(*src++)`) turned into subscripts;
- `mirror_stores`: a symmetric result's mirror stores moved into a pass after its
  triangle;
- `scalarize`: an array element used as an accumulator kept in a local;
- `hoist_factors`: a product's leading factors that an innermost loop does not change
  taken once before it (`alpha * A[i][k] * B[k][j]`).

A move that does not apply to the source as written is tried on these views
(`through_views`), so a nest split across a call or walked with `*p++` is still seen whole;
the result is the view with the move applied."""

from __future__ import annotations

from collections.abc import Callable

from kernelcrew.agents.transforms.views.active_branches import (
    active_branches,
    restore_branches,
)
from kernelcrew.agents.transforms.views.comparisons import unmask_comparisons
from kernelcrew.agents.transforms.views.counted_whiles import counted_whiles
from kernelcrew.agents.transforms.views.expand_macros import expand_macros, restore_declarators
from kernelcrew.agents.transforms.views.hoist_factors import hoist_factors
from kernelcrew.agents.transforms.views.inline_helpers import inline_calls
from kernelcrew.agents.transforms.views.loop_counters import scope_counters, scope_scalars
from kernelcrew.agents.transforms.views.mirror_stores import split_mirrors
from kernelcrew.agents.transforms.views.pointer_walks import index_pointers, split_comma_walks
from kernelcrew.agents.transforms.views.reroll import reroll
from kernelcrew.agents.transforms.views.scalarize import scalarize

# the views in the order they are taken, each on the one before (one line per view)
VIEWS: tuple[Callable[[str, str], str | None], ...] = (
    active_branches,
    unmask_comparisons,
    split_comma_walks,
    scope_counters,
    scope_scalars,
    reroll,
    expand_macros,
    counted_whiles,
    inline_calls,
    index_pointers,
    split_mirrors,
    scalarize,
    hoist_factors,
)


def views(src: str, entry: str) -> list[str]:
    """The rewritten views of `entry` that differ from `src`, each step on the one before,
    in the order of VIEWS."""
    out: list[str] = []
    cur = src
    for step in VIEWS:
        new = step(cur, entry)
        if new is not None and new != cur:
            cur = new
            out.append(cur)
    return out


def preferred(src: str, entry: str) -> str:
    """The view the loop moves read first: the code with its comparisons read as
    comparisons, its counters scoped and its hand-unrolled loops rolled back, rewrites that
    change nothing it computes."""
    plain = active_branches(src, entry) or src
    plain = unmask_comparisons(plain, entry) or plain
    plain = split_comma_walks(plain, entry) or plain
    scoped = scope_counters(plain, entry) or plain
    scoped = scope_scalars(scoped, entry) or scoped
    return reroll(scoped, entry) or scoped


def canonical(src: str, entry: str) -> str:
    """The most rewritten view (the source itself when none applies)."""
    vs = views(src, entry)
    return vs[-1] if vs else src


def through_views(transform: Callable[..., str | None], *, until_done: bool = False
                  ) -> Callable[..., str | None]:
    """`transform(src, entry, ...)`, or, where it does not apply, the same on the first
    view it applies to. `until_done`: applied again (through the views) to its own result
    while it still applies, at most four times: a move that marks the loops it has taken
    (a pragma) then reaches the loops that only a later view shows (a dot product into
    `tmp[i]` that `scalarize` turns into a reduction), not only those of the first view
    it applies to."""
    def once(src: str, entry: str, *args, **kwargs):
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

    def run(src: str, entry: str, *args, **kwargs):
        out = once(src, entry, *args, **kwargs)
        for _ in range(4 if until_done and out is not None else 0):
            again = once(out, entry, *args, **kwargs)
            if again is None or again == out:
                break
            out = again
        # parameters the views declared plainly go back to the code base's spelling, and
        # the other targets' branches the first view set aside go back in
        return restore_branches(src, entry, restore_declarators(src, out))

    run.__name__ = getattr(transform, "__name__", "transform")
    run.__doc__ = transform.__doc__
    return run
