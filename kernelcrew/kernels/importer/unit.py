"""The translation unit of an imported function: the source file and the project headers
it includes, each read with tree-sitter (for the original text), and what the
preprocessor made of them with the build's flags (for what that text means).

`closure` picks the items the function needs, transitively, across the file and its
headers: only items the build compiles, and for each macro the definition in effect
where the function starts (so `#ifdef MEDIUM_DATASET` and `-DDATA_TYPE_IS_FLOAT` choose
as the build chooses). `expanded_function` is the function with its macros expanded, for
the analysis of types, extents and loops.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from kernelcrew.csource.masking import qualifier_macros
from kernelcrew.errors import InputError
from kernelcrew.kernels.importer.preprocess import BuildFlags, MacroDef, Preprocessed, preprocess
from kernelcrew.kernels.importer.source import (
    Function,
    Item,
    SourceFile,
    UnresolvedMacro,
    find_function,
    load_source,
    pick_definitions,
    source_of_text,
    system_includes,
)

MACRO_TYPES = ("preproc_def", "preproc_function_def")


@dataclass
class Unit:
    main: SourceFile
    headers: list[SourceFile] = field(default_factory=list)
    pp: Preprocessed | None = None
    build: BuildFlags = field(default_factory=BuildFlags)

    @property
    def files(self) -> list[SourceFile]:
        return [self.main, *self.headers]

    @property
    def notes(self) -> list[str]:
        return list(self.pp.notes) if self.pp else []

    def macros_at(self, fn: Function) -> dict[str, MacroDef] | None:
        if self.pp is None:
            return None
        pos = self.pp.position(self.main.path, fn.line)
        if pos is None:
            raise InputError(f"line {fn.line}: {fn.name} is under an #if that the build "
                             "leaves out with these flags; give the -D defines that select "
                             "it (--define NAME)", path=self.main.path)
        return self.pp.macros_at(pos)

    def file_of(self, name: str) -> SourceFile | None:
        for sf in self.files:
            if str(sf.path) == name or (name == "<stdin>" and sf is self.main):
                return sf
        return None

    def system_includes(self) -> list[str]:
        """`#include <...>` of the file and its project headers (under #if or not: an
        allow-listed header more than the build includes does no harm)."""
        out = []
        for sf in self.files:
            for h, _line in system_includes(sf):
                if h not in out:
                    out.append(h)
        return out


def load_unit(path: Path, build: BuildFlags) -> Unit:
    if path.suffix.lower() in (".cu", ".cuh"):
        # CUDA: read as written (the host preprocessor differs)
        return Unit(load_source(path), build=build)
    if not path.is_file():
        return Unit(load_source(path), build=build)  # the error names the file
    text = path.read_text(errors="replace")
    pp = preprocess(path, text, build)
    if pp is None:
        return Unit(source_of_text(text, path), build=build)
    # parsed once, knowing what the preprocessor knows: the macros that stand for
    # qualifiers wherever they are defined, and which branch of an #if the build compiles
    quals = {name for _p, m in pp.events if not m.undef
             for name in qualifier_macros(m.text)}
    sf = source_of_text(text, path, quals, lambda ln: pp.is_active(path, ln))
    headers = [load_source(h, quals, lambda ln, h=h: pp.is_active(h, ln))
               for h in pp.headers if h.is_file()]
    return Unit(sf, headers, pp, build)


def expanded_function(unit: Unit, fn: Function) -> tuple[SourceFile, Function, list[int]]:
    """The function with the build's macros expanded, parsed, and the file's line of each
    of its lines; the original where there is no preprocessor."""
    end_line = unit.main.line_of(max(fn.end - 1, fn.start))
    if unit.pp is None:
        first = unit.main.line_of(0)
        return unit.main, fn, list(range(first, unit.main.text.count("\n") + 2))
    rows = unit.pp.expanded_lines(unit.main.path, fn.line, end_line)
    text = "\n".join(t for t, _ln in rows)
    sf = source_of_text(text, unit.main.path)
    try:
        return sf, find_function(sf, fn.name), [ln for _t, ln in rows]
    except InputError:
        raise InputError(f"line {fn.line}: {fn.name} is not a plain function definition once "
                         "its macros are expanded; import the function it expands to",
                         path=unit.main.path) from None


def closure(unit: Unit, fn: Function, skip: set[str] = frozenset()
            ) -> tuple[list[tuple[SourceFile, Item]], list[str]]:
    """The items `fn` needs, in the order the compiler reads them, and the command-line
    macros (-D) it uses."""
    macros = unit.macros_at(fn)
    by_name: dict[str, list[tuple[SourceFile, Item]]] = {}
    for sf in unit.files:
        for it in sf.items:
            if it.node_type == "preproc_include":
                continue
            if macros is not None and it.node_type in MACRO_TYPES:
                continue  # chosen from the preprocessor's table below
            if unit.pp is not None and not unit.pp.is_active(sf.path, it.line):
                continue
            for n in it.defines:
                by_name.setdefault(n, []).append((sf, it))
    chosen: list[tuple[SourceFile, Item]] = [(unit.main, fn.item)]
    seen = {id(fn.item)}
    used_defines: list[str] = []
    todo = list(fn.item.uses)
    done: set[str] = set(fn.item.defines)
    while todo:
        name = todo.pop()
        if name in done or name in skip:
            continue
        done.add(name)
        if macros is not None and name in macros:
            picks = _macro_pick(unit, macros[name], used_defines)
        else:
            cands = [(sf, it) for sf, it in by_name.get(name, [])
                     if sf is not unit.main or it.start < fn.end
                     or it.node_type == "function_definition" or it.is_prototype]
            if not cands:
                continue
            picks = pick_definitions(unit.main if macros is None else cands[0][0], name,
                                     cands)
        for sf, it in picks:
            if id(it) not in seen:
                seen.add(id(it))
                chosen.append((sf, it))
                todo.extend(it.uses)
    return sorted(chosen, key=lambda p: _position(unit, *p)), used_defines


def _macro_pick(unit: Unit, m: MacroDef, used_defines: list[str]
                ) -> list[tuple[SourceFile, Item]]:
    if m.system:
        return []  # the system header is included
    if not m.file:
        if m.name not in used_defines and not m.name.startswith("__"):
            used_defines.append(m.name)  # from the build line: the entry's preamble has it
        return []
    sf = unit.file_of(m.file)
    if sf is None:
        return []
    for it in sf.items:
        if it.node_type in MACRO_TYPES and it.line == m.line and m.name in it.defines:
            return [(sf, it)]
    return []


def _position(unit: Unit, sf: SourceFile, it: Item) -> tuple[int, int, int]:
    if unit.pp is not None:
        pos = unit.pp.position(sf.path, it.line)
        if pos is None and it.node_type in MACRO_TYPES:
            key = "<stdin>" if sf is unit.main else str(sf.path)
            pos = next((p for p, m in unit.pp.events if m.file == key and m.line == it.line),
                       None)
        if pos is not None:
            return (0, pos, 0)
    return (1, unit.files.index(sf), it.start)


__all__ = ["Unit", "UnresolvedMacro", "closure", "expanded_function", "load_unit"]
