"""What a move's `why_not` reads: each entry of a kernel file as the moves read it (its
counters declared at the top moved into their loops, the view every move is tried on
first), so a reason is not a dependence the move never saw."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from kernelcrew.agents.transforms.analysis.common import model_of
from kernelcrew.agents.transforms.kernel_files import entries
from kernelcrew.agents.transforms.views.loop_counters import scope_counters
from kernelcrew.csource.affine import FunctionModel
from kernelcrew.csource.syntax import Source
from kernelcrew.kernels.kernelfile import KernelFile


def read_as(kf: KernelFile, name: str) -> str:
    """The body the reasons are given for: `name`'s top-declared counters moved into
    their loops (the view every move is tried on; it keeps the lines where they are)."""
    return scope_counters(kf.body, name) or kf.body


def entry_models(kf: KernelFile) -> list[tuple[str, Source, FunctionModel]]:
    """(name, source, model) of every entry in reach, read as the moves read it."""
    out = []
    for name in entries(kf):
        got = model_of(read_as(kf, name), name)
        if got is not None:
            out.append((name, *got))
    return out


def first_reasons(reasons: Iterable[str], default: str) -> str:
    """The first three reasons, or `default` when there is none."""
    return "; ".join(list(reasons)[:3]) or default


def per_entry(kf: KernelFile, reasons_of: Callable[[str, str], list[str]], default: str, *,
              as_written: bool = False, skip: tuple[str, ...] = ()) -> str:
    """`reasons_of(body, entry)` for every entry, each prefixed with `entry():`: the first
    three, or `default`. `as_written`: the body as the file has it, not the view;
    `skip`: reasons that contain one of these strings say only that the loop is not of the
    move's form, and are left out."""
    return first_reasons((f"{name}(): {r}" for name, _, _ in entry_models(kf)
                          for r in reasons_of(kf.body if as_written else read_as(kf, name),
                                              name)
                          if not any(x in r for x in skip)), default)
