"""Kernel files as the moves see them: parsing one whose backend is not known, the
functions a move works on (`entries`), the flag list, and the file a move's `Outcome`
renders to (OpenMP flags follow the pragmas)."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import yaml

from kernelcrew.agents.transforms.analysis.scope import scope_of
from kernelcrew.csource.syntax import Source, function_name, functions, walk
from kernelcrew.kernels.kernelfile import (
    FrontMatter,
    KernelFile,
    Launch,
    parse_kernel_text,
    render,
)


@dataclass
class Outcome:
    """What a transformation changes in a kernel file; None fields stay as they were."""

    body: str | None = None
    flags: list[str] | None = None
    knobs: dict[str, int | float] | None = None
    launch: list[Launch] | None = None
    temps: dict[str, Any] | None = None  # CUDA scratch buffers (replaces the whole map)
    compiler: str | None = None  # CPU: the compiler to build with ("g++" for the default)


def parse_any(kernel_text: str) -> KernelFile:
    """Parse a kernel file whose backend is not known: a `launch:` list means CUDA."""
    m = re.match(r"\A\s*/\*\s*kernelcrew[ \t]*\n(?P<yaml>.*?)\*/", kernel_text, re.DOTALL)
    try:
        data = yaml.safe_load(m.group("yaml")) if m else None
    except yaml.YAMLError:
        data = None
    backend = "cuda" if isinstance(data, dict) and data.get("launch") else "cpu"
    return parse_kernel_text(kernel_text, backend)


def entries(kf: KernelFile) -> list[str]:
    """The functions a transformation works on: on the CPU the entry and the helpers it
    calls whose pointers cannot overlap (`scope`: an imported kernel's entry is a thin
    wrapper around the user's function and its helpers), on CUDA every launched kernel and
    the functions it calls."""
    if kf.backend == "cpu":
        return scope_of(Source(kf.body), kf.meta.entry).functions if kf.meta.entry else []
    kernels = list(dict.fromkeys(lc.kernel for lc in kf.meta.launch))
    return list(dict.fromkeys([*kernels, *(c for k in kernels for c in callees(kf.body, k))]))


def callees(body: str, entry: str) -> list[str]:
    """Functions defined in `body` that `entry` calls, directly or not, in call order."""
    s = Source(body)
    defs = {}
    for fn in functions(s):
        name = function_name(fn)
        if name and name not in defs:
            defs[name] = fn
    out: list[str] = []
    todo = [entry]
    while todo:
        fn = defs.get(todo.pop(0))
        if fn is None:
            continue
        for n in walk(fn):
            if n.type == "call_expression":
                name = s.text_of(n.child_by_field_name("function"))
                if name in defs and name != entry and name not in out:
                    out.append(name)
                    todo.append(name)
    return out


def called_in_loops(body: str, names: list[str]) -> set[str]:
    """The functions of `names` that some function calls from inside a loop: threads go
    on the caller's loop (a parallel region inside it would run nested, on one thread)."""
    s = Source(body)
    out = set()
    for n in walk(s.root):
        if n.type != "call_expression":
            continue
        name = s.text_of(n.child_by_field_name("function")).strip()
        p = n.parent
        while name in names and p is not None and p.type != "function_definition":
            if p.type in ("for_statement", "while_statement", "do_statement"):
                out.add(name)
                break
            p = p.parent
    return out


def each_entry(kf: KernelFile, fn: Callable[[str, str], str | None]) -> Outcome | None:
    """`fn(body, entry)` on every entry in turn, each on the body the one before left;
    None when it applies to none."""
    body, changed = kf.body, False
    for e in entries(kf):
        new = fn(body, e)
        if new is not None:
            body, changed = new, True
    return Outcome(body=body) if changed else None


_OPT = re.compile(r"^-O(\d|s|fast)$")
_MAXRREG = re.compile(r"^--?maxrregcount=\d+$")


def edit_flags(flags: list[str], add: list[str] | tuple[str, ...] = (),
               remove: list[str] | tuple[str, ...] = ()) -> list[str]:
    """Add and remove flags; an added -O level or -maxrregcount replaces the old one."""
    out = [f for f in flags if f not in remove]
    for f in add:
        if _OPT.match(f):
            out = [g for g in out if not _OPT.match(g)]
        if _MAXRREG.match(f):
            out = [g for g in out if not _MAXRREG.match(g)]
        if f not in out:
            out.append(f)
    return out


def openmp_flags(body: str, flags: list[str]) -> list[str]:
    """-fopenmp when the source has OpenMP threading pragmas, -fopenmp-simd for simd only."""
    clean = Source(body)
    pragmas = [clean.text_of(n) for n in walk(clean.root) if n.type == "preproc_call"]
    threads = any(re.search(r"#\s*pragma\s+omp\s+(parallel|for|task|single|critical|atomic)",
                            p) for p in pragmas)
    simd = any(re.search(r"#\s*pragma\s+omp\b.*\bsimd\b", p) for p in pragmas)
    if threads:
        return edit_flags(flags, add=["-fopenmp"], remove=["-fopenmp-simd"])
    if simd and "-fopenmp" not in flags:
        return edit_flags(flags, add=["-fopenmp-simd"])
    return flags


def render_outcome(kf: KernelFile, out: Outcome) -> str:
    """The kernel file text with `out` applied to `kf`."""
    meta: FrontMatter = kf.meta.model_copy(deep=True)
    body = kf.body if out.body is None else out.body
    flags = list(meta.flags) if out.flags is None else list(out.flags)
    if kf.backend == "cpu":
        flags = openmp_flags(body, flags)
    meta.flags = flags
    if out.knobs:
        meta.knobs = {**meta.knobs, **out.knobs}
    if out.launch is not None:
        meta.launch = out.launch
    if out.temps is not None:
        meta.temps = out.temps
    if out.compiler is not None:
        meta.compiler = None if out.compiler == "g++" else out.compiler
    return render(meta, body)
