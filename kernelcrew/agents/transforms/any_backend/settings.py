"""Moves that change settings rather than code, on either backend: the flag list, knob
values, and a sequence of other moves applied in order. They are never "not applicable"
(`catalogue.SETTINGS`)."""

from __future__ import annotations

from typing import Any

from kernelcrew.agents.transforms.kernel_files import Outcome, edit_flags
from kernelcrew.agents.transforms.registry import apply_transform
from kernelcrew.kernels.kernelfile import KernelFile, parse_kernel_text


def flags_in_file(kf: KernelFile, p: dict[str, Any]) -> Outcome | None:
    """Edit the flag list: add / remove, or set it outright (OpenMP flags are kept)."""
    if p.get("set") is not None:
        flags = list(p["set"])
        keep = [f for f in kf.meta.flags if f in ("-fopenmp", "-fopenmp-simd")]
        flags = edit_flags(flags, add=keep)
    else:
        flags = edit_flags(list(kf.meta.flags), list(p.get("add") or ()),
                           list(p.get("remove") or ()))
    return Outcome(flags=flags)


def knobs_in_file(kf: KernelFile, p: dict[str, Any]) -> Outcome | None:
    """Set knob values; None when they are set already."""
    values = dict(p.get("values") or {})
    if not values or all(kf.meta.knobs.get(k) == v for k, v in values.items()):
        return None
    return Outcome(knobs=values)


def sequence_in_file(kf: KernelFile, p: dict[str, Any]) -> Outcome | None:
    """Several moves in order (by name, through the registry); steps that no longer
    apply are skipped."""
    text = kf.text
    for step in p.get("steps") or []:
        new = apply_transform(step["transform"], text, step.get("params") or {})
        if new is not None:
            text = new
    if text == kf.text:
        return None
    done = parse_kernel_text(text, kf.backend)
    return Outcome(body=done.body, flags=list(done.meta.flags), knobs=dict(done.meta.knobs),
                   launch=list(done.meta.launch))
