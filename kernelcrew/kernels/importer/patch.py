"""`kernelcrew export RUN --patch`: the best kernel of a run on an imported operator, as a
unified diff against the original source file.

The best kernel file and the original file are both read with tree-sitter and compared
item by item (functions, macros, declarations, top-level pragmas, includes), by the
names each defines: the imported function's definition is replaced, other items of the
file the crew changed (a static helper) are replaced in place, new items (helpers,
macros, pragmas, knob values as `#define`s) go in before the function, and new includes
after the file's last include. What the importer generated (the entry, `--define`
lines) stays out. The diff's paths are relative to the repository root (the nearest
folder with `.git`, else the file's folder), so `patch -p1` or `git apply` there puts it
back.
"""

from __future__ import annotations

import difflib
import hashlib
import re
from dataclasses import dataclass, field
from pathlib import Path

from kernelcrew.csource.masking import qualifier_macros
from kernelcrew.errors import InputError
from kernelcrew.kernels.importer import vla
from kernelcrew.kernels.importer.source import Item, SourceFile, load_source, source_of_text
from kernelcrew.kernels.kernelfile import parse_kernel_text
from kernelcrew.kernels.spec import OpSpec

_RESTRICT = re.compile(r"\b(__restrict__|__restrict|restrict)\b")
_HARNESS_ONLY = {"-w"}


@dataclass
class PatchResult:
    patch: str
    root: Path  # where to run `patch -p1`
    relpath: str
    flags: list[str]  # every flag the best kernel is compiled with
    added_flags: list[str]  # the ones the baseline did not have
    changed: list[str]  # names of the items replaced or added
    notes: list[str] = field(default_factory=list)


def repo_root(path: Path) -> Path:
    for d in [path.parent, *path.parent.parents]:
        if (d / ".git").exists():
            return d
    return path.parent


def _norm(text: str) -> str:
    return " ".join(text.split())


def _key(it: Item) -> tuple[str, frozenset[str]]:
    kind = "macro" if it.node_type in ("preproc_def", "preproc_function_def") else (
        "proto" if it.is_prototype else it.node_type)
    return kind, frozenset(it.defines)


def _header(it: Item, data: bytes) -> str | None:
    m = re.search(r"<\s*([\w./]+)\s*>", it.text(data))
    return m.group(1) if it.node_type == "preproc_include" and m else None


@dataclass
class _Sides:
    """The original file, the best kernel and the baseline, each read item by item."""

    src_path: Path
    orig: SourceFile
    best: SourceFile
    base: SourceFile
    best_kf: object
    base_kf: object
    backend: str
    notes: list[str]
    orig_by_key: dict[tuple, Item] = field(default_factory=dict)

    @property
    def is_c(self) -> bool:
        return self.src_path.suffix.lower() == ".c"


@dataclass
class _Edits:
    replace: list[tuple[Item, str]] = field(default_factory=list)
    added: list[str] = field(default_factory=list)
    headers: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)


def _sides(spec: OpSpec, best_text: str, baseline_text: str) -> _Sides:
    origin = spec.origin
    if origin is None:
        raise InputError("this operator was not imported (no `origin:` in op.yaml), so there "
                         "is no original file to patch; use `kernelcrew import`",
                         path=spec.folder / "op.yaml" if spec.folder else None, field="origin")
    src_path = Path(origin.source)
    # the baseline holds the definitions the import copied from the project's headers:
    # the macros standing for qualifiers there are blanked for the parse here too
    orig = load_source(src_path, qualifier_macros(baseline_text))
    notes: list[str] = []
    if origin.sha256 and hashlib.sha256(orig.data).hexdigest() != origin.sha256:
        notes.append(f"{src_path.name} changed since it was imported; the patch is made "
                     "against its current text")
    backend = "cuda" if "cuda" in spec.baselines and "cpu" not in spec.baselines else "cpu"
    best_kf = parse_kernel_text(best_text, backend)
    base_kf = parse_kernel_text(baseline_text, backend)
    # C99 VLA parameters the import lowered get their own declarations back
    best = source_of_text(vla.restore(best_kf.body), Path("best.cpp"))
    base = source_of_text(vla.restore(base_kf.body), Path("baseline.cpp"))
    sides = _Sides(src_path, orig, best, base, best_kf, base_kf, backend, notes)
    for it in orig.items:
        if it.defines:
            sides.orig_by_key.setdefault(_key(it), it)
    fn_key = ("function_definition", frozenset({origin.function}))
    if fn_key not in sides.orig_by_key:
        raise InputError(f"{origin.function} is no longer defined in the original file; "
                         "import it again", path=src_path)
    if not any(_key(it) == fn_key for it in best.items):
        raise InputError(f"the best kernel no longer defines {origin.function} (the crew "
                         "rewrote the entry instead): nothing to put back", path=src_path)
    return sides


def _edits(s: _Sides, function: str) -> _Edits:
    """What of the best kernel goes into the original file, and where."""
    orig, best, base = s.orig, s.best, s.base
    # generated by the importer: in the baseline, not in the original (the entry, -D lines,
    # definitions copied from the project's headers)
    generated = {_key(it) for it in base.items if it.defines and _key(it) not in s.orig_by_key}
    orig_texts = {_norm(it.text(orig.data)) for it in orig.items}
    orig_headers = {h for it in orig.items if (h := _header(it, orig.data))}
    base_headers = {h for it in base.items if (h := _header(it, base.data))}
    base_texts = {_norm(it.text(base.data)) for it in base.items}
    fn_key = ("function_definition", frozenset({function}))
    e = _Edits()
    for it in best.items:
        text = it.text(best.data).rstrip()
        h = _header(it, best.data)
        if h is not None:
            if h not in base_headers:  # else the baseline had it (for the generated entry)
                _add_header(s, e, h, orig_headers)
            continue
        key = _key(it)
        if key in generated:
            continue
        if key == fn_key and s.backend == "cuda":
            text = _as_global(text, s.orig_by_key[fn_key].text(orig.data))
        if key in s.orig_by_key:
            o = s.orig_by_key[key]
            if _norm(o.text(orig.data)) != _norm(text):
                if key == fn_key:
                    _check_function(s, o.text(orig.data), text, function)
                e.replace.append((o, text))
                e.changed.append("/".join(sorted(it.defines)))
            continue
        if _norm(text) in orig_texts or _norm(text) in base_texts:
            continue  # a pragma or item that is already in the file
        if it.block is not None:  # added under #if/#ifndef: the whole block, once
            text = best.data[it.block[0]:it.block[1]].decode().rstrip()
            if text in e.added or _norm(text) in orig_texts:
                continue
        e.added.append(text)
        e.changed.append("/".join(sorted(it.defines)) or text.split("\n")[0][:40])
    return e


def _add_header(s: _Sides, e: _Edits, h: str, orig_headers: set[str]) -> None:
    if s.is_c and h in C_HEADERS:
        h = C_HEADERS[h]
    if h not in orig_headers and h not in e.headers:
        e.headers.append(h)
        if s.is_c and "." not in h:
            s.notes.append(f"the best kernel includes the C++ header <{h}>, and "
                           f"{s.src_path.name} is C")


def _check_function(s: _Sides, old: str, new: str, function: str) -> None:
    _same_signature(old, new, function, s.src_path)
    if len(_RESTRICT.findall(new.split("{", 1)[0])) > len(
            _RESTRICT.findall(old.split("{", 1)[0])):
        s.notes.append(f"the new {function} marks its pointers __restrict__: callers must "
                       "not pass overlapping arrays")


def _head(spec: OpSpec, s: _Sides, root: Path, rel: str, flags: list[str],
          added_flags: list[str]) -> str:
    function = spec.origin.function
    knobs = s.best_kf.meta.knobs
    head = (f"kernelcrew: best kernel for {function} ({spec.name}); apply in {root} "
            f"with `patch -p1` or `git apply`.\n"
            f"Compile {rel} with: {' '.join(flags)}"
            + (f" (new: {' '.join(added_flags)})" if added_flags else "") + "\n")
    compiler = getattr(s.best_kf.meta, "compiler", None)
    if compiler and s.backend == "cpu":
        # the best kernel was measured built by another compiler: name it, as built
        head += f"The best kernel needs its compiler: {s.best_kf.build_line()} (as measured).\n"
    for lc in s.best_kf.meta.launch:
        def sub(e: object) -> str:
            return re.sub(r"\b\w+\b", lambda m: str(knobs.get(m.group(0), m.group(0))),
                          str(e))
        head += (f"Launch {function} with grid ({', '.join(sub(g) for g in lc.grid)}), "
                 f"block ({', '.join(sub(b) for b in lc.block)}), dynamic shared memory "
                 f"{sub(lc.shared_bytes)} bytes.\n")
    return head + "".join(f"Note: {n}\n" for n in s.notes)


def make_patch(spec: OpSpec, best_text: str, baseline_text: str) -> PatchResult:
    s = _sides(spec, best_text, baseline_text)
    origin = spec.origin
    e = _edits(s, origin.function)
    knobs = s.best_kf.meta.knobs
    defined = {n for it in s.best.items for n in it.defines}
    knob_lines = [f"#ifndef {k}\n#define {k} {v}  // kernelcrew knob\n#endif"
                  for k, v in knobs.items() if k not in defined]  # else the kernel has it
    fn_key = ("function_definition", frozenset({origin.function}))
    new = _apply(s.orig, e.replace, [*knob_lines, *e.added], e.headers,
                 s.orig_by_key[fn_key].start)
    root = repo_root(s.src_path.resolve())
    rel = s.src_path.resolve().relative_to(root).as_posix()
    diff = list(difflib.unified_diff(_lines(s.orig.text), _lines(new), f"a/{rel}", f"b/{rel}"))
    flags = [f for f in s.best_kf.meta.flags if f not in _HARNESS_ONLY]
    base_flags = set(origin.flags or s.base_kf.meta.flags)
    added_flags = [f for f in flags if f not in base_flags]
    head = _head(spec, s, root, rel, flags, added_flags)
    return PatchResult(head + "\n" + "".join(diff) if diff else "", root, rel, flags,
                       added_flags, e.changed, s.notes)


C_HEADERS = {"cmath": "math.h", "cstdint": "stdint.h", "cstddef": "stddef.h",
             "climits": "limits.h", "cfloat": "float.h", "cstring": "string.h",
             "cstdlib": "stdlib.h"}


def _as_global(new: str, old: str) -> str:
    """The imported kernel's `__device__` (the generated entry calls it) back to `__global__`,
    with the original's launch bounds."""
    head, brace, body = new.partition("{")
    head = re.sub(r"\b__device__\b", "__global__", head, count=1)
    bounds = re.search(r"__launch_bounds__\s*\((?:[^()]|\([^()]*\))*\)", old.split("{", 1)[0])
    if bounds and "__launch_bounds__" not in head:
        head = head.replace("__global__", f"__global__ {bounds.group(0)}", 1)
    return head + brace + body


def _lines(text: str) -> list[str]:
    out = text.splitlines(keepends=True)
    if out and not out[-1].endswith("\n"):
        out[-1] += "\n"  # the diff would need "\ No newline at end of file" otherwise
    return out


def _same_signature(old: str, new: str, name: str, path: Path) -> None:
    def sig(t: str) -> str:
        head = t.split("{", 1)[0]
        head = _RESTRICT.sub(" ", head)
        head = re.sub(r"\b(static|inline|__attribute__\s*\(\(.*?\)\))\b", " ", head)
        return re.sub(r"\s+", "", head)

    if sig(old) != sig(new):
        raise InputError(f"the best kernel changed the parameters of {name} "
                         f"({sig(new)[:80]!r}); the patch keeps the interface, so this kernel "
                         "cannot be put back as it is", path=path)


def _apply(orig: SourceFile, replace: list[tuple[Item, str]], added: list[str],
           headers: list[str], fn_start: int) -> str:
    data = orig.data
    edits: list[tuple[int, int, str]] = [(it.start, it.end, text) for it, text in replace]
    if added:
        line_start = data.rfind(b"\n", 0, fn_start) + 1
        edits.append((line_start, line_start, "\n\n".join(added) + "\n\n"))
    if headers:
        incs = [it for it in orig.items if it.node_type == "preproc_include"
                and not it.conditional]
        at = incs[-1].end if incs else 0
        text = "".join(f"#include <{h}>\n" for h in headers)
        if incs and data[at - 1:at] != b"\n":
            text = "\n" + text
        edits.append((at, at, text))
    out, pos = [], 0
    for s, e, t in sorted(edits, key=lambda x: (x[0], x[1])):
        out.append(data[pos:s])
        out.append(t.encode())
        pos = max(pos, e)
    out.append(data[pos:])
    return b"".join(out).decode()
