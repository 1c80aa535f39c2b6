"""Kernel formats: what a kernel file for each backend is, as data.

Every fact about a kernel file that depends on the backend lives here, so no code has to
branch on a backend's name to know it: the file name endings, which front matter the
file needs (an `entry` the worker calls, or a `launch` plan the harness runs), which
source rules and headers apply (`kernels.policy`), which optimization flags are allowed
(`kernels.flags`), how sizes are declared, and which baseline of an operator it races.

A backend's own module (`kernelcrew/tools/backends/<name>.py`) holds how it compiles and
runs; a new backend whose kernel files are written like an existing one's registers a
copy of that format under its name:

    register_format(replace(FORMATS["cpu"], backend="cpu1", suffixes=(".cpu1.cpp",),
                            baselines="cpu"))
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from kernelcrew.errors import InputError


@dataclass(frozen=True)
class KernelFormat:
    backend: str  # the backend that compiles and runs these files
    suffixes: tuple[str, ...]  # file name endings, the first the one written
    # host: C++ compiled into a library the worker calls through `entry`, kernelcrew's
    # host code nowhere; device: device code only, launched by the harness from `launch`
    code: Literal["host", "device"]
    flags: Literal["gcc", "nvcc"]  # the allow-list of optimization flags (kernels.flags)
    size_type: str  # how an entry declares the op's sizes
    language: str  # the source's language, as a Markdown code fence names it
    baselines: str = ""  # the `baselines:` key of op.yaml it races (default: `backend`)

    @property
    def suffix(self) -> str:
        return self.suffixes[0]

    @property
    def baseline_key(self) -> str:
        return self.baselines or self.backend

    @property
    def needs(self) -> Literal["entry", "launch"]:
        """The front-matter field a file of this format cannot do without."""
        return "entry" if self.code == "host" else "launch"


FORMATS: dict[str, KernelFormat] = {}


def register_format(fmt: KernelFormat) -> KernelFormat:
    """Make `fmt` known: kernel files ending in its suffixes load as its backend's."""
    taken = {s: f.backend for f in FORMATS.values() if f.backend != fmt.backend
             for s in f.suffixes}
    clash = [s for s in fmt.suffixes if s in taken]
    if clash:
        raise ValueError(f"suffix {clash[0]} is the {taken[clash[0]]} backend's already")
    FORMATS[fmt.backend] = fmt
    return fmt


register_format(KernelFormat("cpu", (".cpp", ".cc", ".cxx", ".c"), code="host", flags="gcc",
                             size_type="int64_t", language="cpp"))
register_format(KernelFormat("cuda", (".cu", ".cuh"), code="device", flags="nvcc",
                             size_type="long long", language="cuda"))


def format_for(backend: str, *, path: Path | None = None) -> KernelFormat:
    """The format of `backend`'s kernel files; an unknown backend is bad input."""
    try:
        return FORMATS[backend]
    except KeyError:
        raise InputError(f"unknown backend {backend!r}; use one of {', '.join(FORMATS)}",
                         path=path) from None


def format_of_name(name: str | Path) -> KernelFormat | None:
    """The format whose suffix ends the file name (the longest that matches), or None."""
    lower = str(name).lower()
    found = [(len(s), f) for f in FORMATS.values() for s in f.suffixes if lower.endswith(s)]
    return max(found, key=lambda t: t[0])[1] if found else None


def format_of_path(path: Path) -> KernelFormat:
    """As `format_of_name`, with a one-line error naming the endings that are known."""
    fmt = format_of_name(path.name)
    if fmt is None:
        known = ", ".join(f"{f.suffix} ({f.backend})" for f in FORMATS.values())
        raise InputError(f"unknown kernel file type {path.suffix.lower()!r}; use {known}",
                         path=path)
    return fmt
