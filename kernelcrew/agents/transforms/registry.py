"""The registry of moves: one way to register a move, and the calls that apply one by name.

A move (a named transformation) takes a kernel file's text and parameters and returns the
new kernel file text (front matter kept valid: flags such as -fopenmp follow the pragmas,
knobs the macros the source uses), or None when it does not apply to that text. Because
moves are named, a proposal's change can be replayed on another base:
`apply_change(change, text)`. The coordinator relies on this to merge compatible proposals
into one candidate.

    register_transform(name, backends, doc, fn, **defaults)

registers a move; `catalogue.py` holds the line of every built-in one.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kernelcrew.agents.transforms.kernel_files import (
    Outcome,
    each_entry,
    parse_any,
    render_outcome,
)
from kernelcrew.csource.syntax import EditConflict
from kernelcrew.errors import InputError
from kernelcrew.kernels.kernelfile import KernelFile, parse_kernel_text

# why a move does not apply to a kernel file: a sentence, or a function of the file
WhyNot = str | Callable[[KernelFile], str] | None


@dataclass(frozen=True)
class Transform:
    name: str
    kind: str  # the Change.kind it produces (its name)
    backends: tuple[str, ...]
    run: Callable[[KernelFile, dict[str, Any]], Outcome | None]
    doc: str = ""
    params: dict[str, Any] = field(default_factory=dict)  # parameter -> default
    why_not: WhyNot = None  # see `catalogue.not_applicable`


TRANSFORMS: dict[str, Transform] = {}


def register_transform(name: str, backends: tuple[str, ...], doc: str,
                       fn: Callable[..., Any], *, whole_file: bool = False,
                       why_not: WhyNot = None, **defaults: Any) -> Transform:
    """Register a move named `name` for `backends` ("cpu", "cuda"); `doc` is the line users
    and the LLM specialists read. It becomes a proposal kind of its own name and is
    replayable by `apply_change` like every other.

    By default `fn(source_after_front_matter, entry_name)` returns the new source, or None
    where it does not apply; it is applied to every entry of the kernel file in turn.
    Keyword defaults make it take parameters: `fn(source, entry, **params)`, each
    parameter converted to its default's type (a replayed change may carry 4.0 or "4").

    With `whole_file=True`, `fn(kernel_file, params) -> Outcome | None` sees the whole
    file (front matter, launches) and gets the defaults merged with the given parameters
    as they are: for moves that set knobs, flags or launch geometry.

    `why_not` says why the move does not apply to a file (`catalogue.not_applicable`): a
    sentence, or a function of the KernelFile returning one."""
    if name in TRANSFORMS:
        raise ValueError(f"a transform named {name!r} is already registered")
    if whole_file:
        run = fn
    elif not defaults:
        def run(kf: KernelFile, p: dict[str, Any]) -> Outcome | None:
            return each_entry(kf, fn)
    else:
        def run(kf: KernelFile, p: dict[str, Any]) -> Outcome | None:
            args = {k: type(d)(p[k]) for k, d in defaults.items()}
            return each_entry(kf, lambda s, e: fn(s, e, **args))
    t = Transform(name, name, tuple(backends), run, doc, dict(defaults), why_not)
    TRANSFORMS[name] = t
    return t


def transform_names(backend: str | None = None) -> list[str]:
    """The registered moves (for `backend` only, when given), in registration order."""
    return [n for n, t in TRANSFORMS.items() if backend is None or backend in t.backends]


def apply_transform(name: str, kernel_text: str, params: dict[str, Any] | None = None
                    ) -> str | None:
    """Run a named transformation on a kernel file's text; None when it does not apply
    (or the result would not be a valid kernel file). `params["then"]`, a list of
    [name, params] pairs, runs further transformations on the result, each of which must
    apply: a move that only pays with its follow-up (threads over rows, then the rows
    jammed) is proposed and replayed as one."""
    params = dict(params or {})
    then = params.pop("then", None) or []
    text = _apply_one(name, kernel_text, params)
    for step, step_params in then:
        if text is None:
            break
        text = _apply_one(step, text, step_params)
    return text


def _apply_one(name: str, kernel_text: str, params: dict[str, Any]) -> str | None:
    t = TRANSFORMS.get(name)
    if t is None:
        raise KeyError(f"unknown transform {name!r}; known: {', '.join(TRANSFORMS)}")
    try:
        kf = parse_any(kernel_text)
    except InputError:
        return None
    if kf.backend not in t.backends:
        return None
    try:
        out = t.run(kf, {**t.params, **(params or {})})
    except EditConflict:
        return None  # the rewrite would garble the source: treat it as not applicable
    if out is None:
        return None
    text = render_outcome(kf, out)
    try:
        new = parse_kernel_text(text, kf.backend)
    except InputError:
        return None
    return None if new.text == kf.text else new.text


def apply_change(change: Any, kernel_text: str) -> str | None:
    """Re-apply a proposal's change to another kernel file text (the coordinator's merge).
    Uses `change.transform`/`change.params` when set; flag and knob changes without a
    transform are replayed from `change.flags`/`change.knobs`. None: cannot be replayed
    on this text (a free-form rewrite, or the transformation no longer applies)."""
    name = getattr(change, "transform", None)
    params = getattr(change, "params", None) or {}
    if name:
        return apply_transform(name, kernel_text, params)
    if change.type == "flags" and change.flags is not None:
        return apply_transform("flags", kernel_text, {"set": list(change.flags)})
    if change.type == "knobs" and change.knobs:
        return apply_transform("knobs", kernel_text, {"values": dict(change.knobs)})
    return None


def set_block(kernel_text: str, block: int, knob: str = "BLOCK") -> str | None:
    """A CUDA kernel file with its block-size knob set to `block` (None: no such knob)."""
    try:
        if knob not in parse_any(kernel_text).meta.knobs:
            return None
    except InputError:
        return None
    return apply_transform("knobs", kernel_text, {"values": {knob: int(block)}})
