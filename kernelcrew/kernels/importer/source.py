"""Read a C/C++/CUDA source file with tree-sitter: its top-level items, what each defines
and uses, and one function's parameters (unit.py picks the items a function needs).

Everything keeps byte offsets into the original text, so the extracted code is the
original code, character for character (the only change: macro lines continued with a
backslash are joined, which is what the preprocessor does first anyway).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

import tree_sitter as ts
import tree_sitter_cpp

from kernelcrew.csource.masking import Masked, mask
from kernelcrew.errors import InputError

Node = ts.Node

# CUDA words the C++ grammar does not know are blanked (same length) before parsing.
_CUDA_WORDS = re.compile(
    rb"\b(__global__|__device__|__host__|__forceinline__|__noinline__|__shared__|__constant__"
    rb"|__managed__)\b|\b__launch_bounds__\s*\((?:[^()]|\([^()]*\))*\)")
_IDENT = re.compile(r"[A-Za-z_]\w*")
_CONTAINERS = {"preproc_if", "preproc_ifdef", "preproc_else", "preproc_elif",
               "preproc_elifdef", "linkage_specification", "declaration_list",
               "namespace_definition"}
_CONDITIONALS = {"preproc_if", "preproc_ifdef", "preproc_else", "preproc_elif",
                 "preproc_elifdef"}


@cache
def parser() -> ts.Parser:
    return ts.Parser(ts.Language(tree_sitter_cpp.language()))


def parse(text: str) -> ts.Tree:
    data = text.encode()
    return parser().parse(_CUDA_WORDS.sub(lambda m: b" " * (m.end() - m.start()), data))


def walk(node: Node):
    stack = [node]
    while stack:
        n = stack.pop()
        yield n
        stack.extend(reversed(n.children))


@dataclass
class Item:
    """One top-level piece of the file: a function, a declaration, a macro, an include."""

    node_type: str
    start: int  # byte offsets into the file
    end: int
    line: int  # 1-based
    defines: set[str]
    uses: set[str]
    conditional: bool  # under #if/#ifdef
    is_prototype: bool = False
    node_start: int = -1  # the syntax node's start (after CUDA words the parser skips)
    block: tuple[int, int] | None = None  # the outermost #if block holding it, if any

    def text(self, data: bytes) -> str:
        return data[self.start:self.end].decode()


@dataclass
class Param:
    name: str
    base: str  # the base type as written, e.g. float, int64_t, size_t
    pointer: int  # number of `*`, and 1 for an array parameter (`float a[]`, `a[N][M]`)
    const: bool  # the pointee (or the value) is const
    text: str  # the whole parameter as written
    line: int
    # an array parameter's dimensions after the first, which it keeps (`float a[N][M]` is a
    # pointer to rows of M floats: ["M"])
    dims: list[str] = field(default_factory=list)
    extent0: str = ""  # the first dimension as declared (`N` in `a[N][M]`; "" for `a[]`, `*a`)


@dataclass
class Function:
    name: str
    line: int
    start: int
    end: int
    body_start: int
    params: list[Param]
    is_global: bool  # CUDA __global__
    item: Item
    node: Node | None = field(default=None, repr=False)  # its function_definition node


@dataclass
class SourceFile:
    path: Path
    text: str
    data: bytes = field(repr=False)
    tree: ts.Tree = field(repr=False)
    items: list[Item] = field(default_factory=list)
    # what the parser read: qualifier macros and declaration fragments under #if blanked
    masked: Masked | None = field(default=None, repr=False)

    def line_of(self, offset: int) -> int:
        return self.data.count(b"\n", 0, offset) + 1


def load_source(path: Path, macros: Iterable[str] = (),
                active: Callable[[int], bool] | None = None) -> SourceFile:
    if not path.is_file():
        raise InputError("no such source file; give the C, C++ or CUDA file that holds the "
                         "function", path=path)
    return source_of_text(path.read_text(errors="replace"), path, macros, active)


def source_of_text(text: str, path: Path, macros: Iterable[str] = (),
                   active: Callable[[int], bool] | None = None) -> SourceFile:
    """The file's items, parsed from its text with the macros that stand for qualifiers
    (its own `#define`s and `macros`) and `#if` fragments of declarations blanked
    (csource/masking.py; `active(line)`: the lines the build compiles)."""
    masked = mask(text, macros, active)
    tree = parse(masked.text)
    sf = SourceFile(path=path, text=text, data=text.encode(), tree=tree, masked=masked)
    _collect(sf, tree.root_node, conditional=False)
    return sf


def _idents(node: Node, data: bytes) -> set[str]:
    out: set[str] = set()
    for n in walk(node):
        if n.type in ("identifier", "type_identifier", "namespace_identifier"):
            out.add(data[n.start_byte:n.end_byte].decode())
        elif n.type == "preproc_arg":
            out |= set(_IDENT.findall(data[n.start_byte:n.end_byte].decode()))
    return out


def _declared_names(decl: Node, data: bytes) -> set[str]:
    """Names a declarator declares (the identifier at the bottom of each declarator)."""
    out: set[str] = set()
    d: Node | None = decl
    while d is not None and d.type not in ("identifier", "type_identifier", "field_identifier"):
        nxt = d.child_by_field_name("declarator")
        if nxt is None:
            nxt = next((c for c in d.named_children if c.type in (
                "identifier", "pointer_declarator", "array_declarator", "function_declarator",
                "init_declarator", "parenthesized_declarator", "reference_declarator")), None)
        d = nxt
    if d is not None:
        out.add(data[d.start_byte:d.end_byte].decode())
    return out


_CONDITION_PARTS = {"identifier", "preproc_defined", "binary_expression", "unary_expression",
                    "parenthesized_expression", "number_literal", "call_expression",
                    "namespace_identifier", "comment", "char_literal"}


def _collect(sf: SourceFile, node: Node, conditional: bool,
             block: tuple[int, int] | None = None) -> None:
    data = sf.data
    for child in node.named_children:
        t = child.type
        if t in _CONTAINERS:
            outer = block or ((child.start_byte, child.end_byte) if t in _CONDITIONALS
                              else None)
            _collect(sf, child, conditional or t in _CONDITIONALS, outer)
            continue
        if t in _CONDITION_PARTS:
            continue  # the condition of an #if, the name of an #ifdef or a namespace
        defines: set[str] = set()
        proto = False
        if t in ("preproc_def", "preproc_function_def"):
            name = child.child_by_field_name("name")
            if name is not None:
                defines.add(data[name.start_byte:name.end_byte].decode())
        elif t == "function_definition":
            defines |= _declared_names(child, data)
        elif t == "declaration":
            for d in child.children_by_field_name("declarator"):
                names = _declared_names(d, data)
                defines |= names
                if d.type == "function_declarator":
                    proto = True
            for spec in child.named_children:
                if spec.type in ("struct_specifier", "enum_specifier", "union_specifier") \
                        and spec.child_by_field_name("body") is not None:
                    defines |= _type_names(spec, data)
        elif t == "type_definition":
            for d in child.children_by_field_name("declarator"):
                defines |= _declared_names(d, data)
            ty = child.child_by_field_name("type")
            if ty is not None:
                defines |= _type_names(ty, data)
        elif t in ("struct_specifier", "enum_specifier", "union_specifier"):
            defines |= _type_names(child, data)
        end = child.end_byte
        if t in ("preproc_def", "preproc_function_def"):
            end = _logical_line_end(data, child.start_byte, end)
        uses = _idents(child, data) - defines
        if sf.masked is not None:
            uses |= sf.masked.uses(data, child.start_byte, end) - defines
        first = _with_cuda_words(data, child.start_byte)
        # a declaration that begins inside an #if group of fragments is copied from the
        # group's #if (its line stays the declaration's own)
        start = sf.masked.fragment_start(first) if sf.masked is not None else first
        sf.items.append(Item(t, start, end, sf.line_of(first), defines, uses,
                             conditional, proto, child.start_byte, block))


def _logical_line_end(data: bytes, start: int, end: int) -> int:
    """Where a `#define` ends: after its line and the lines it continues with `\\`. The
    parser can take the next line too (`#define ATTR ` with a trailing blank, then
    `#endif`: the item would carry an `#endif` without its `#if`)."""
    k = start
    while True:
        nl = data.find(b"\n", k, end)
        if nl < 0:
            return end
        if data[k:nl].rstrip(b" \t\r").endswith(b"\\"):
            k = nl + 1
            continue
        return nl + 1


_LEADING_CUDA = re.compile(
    rb"(?:(?:__global__|__device__|__host__|__forceinline__|__noinline__|__constant__|"
    rb"__managed__|__launch_bounds__\s*\((?:[^()]|\([^()]*\))*\))\s*)+\Z")


def _with_cuda_words(data: bytes, start: int) -> int:
    """The start of an item including the CUDA words before it (blanked for the parser)."""
    m = _LEADING_CUDA.search(data[max(0, start - 300):start])
    return start - (len(m.group(0)) if m else 0)


def _type_names(spec: Node, data: bytes) -> set[str]:
    out: set[str] = set()
    name = spec.child_by_field_name("name")
    if name is not None:
        out.add(data[name.start_byte:name.end_byte].decode())
    if spec.type == "enum_specifier":
        body = spec.child_by_field_name("body")
        for e in (body.named_children if body is not None else []):
            if e.type == "enumerator":
                n = e.child_by_field_name("name")
                if n is not None:
                    out.add(data[n.start_byte:n.end_byte].decode())
    return out


def find_function(sf: SourceFile, name: str,
                  active: Callable[[int], bool] | None = None) -> Function:
    """The function `name` defined in the file: the first definition on a line the build
    compiles (`active(line)`, from the preprocessor), where the file defines it under
    several `#if` branches (one per target)."""
    defs = [it for it in sf.items if it.node_type == "function_definition" and name in it.defines]
    if active is not None and len(defs) > 1:
        defs = [it for it in defs if active(it.line)] or defs
    if not defs:
        known = sorted({n for it in sf.items if it.node_type == "function_definition"
                        for n in it.defines})
        near = ", ".join(known[:12]) + (" ..." if len(known) > 12 else "")
        raise InputError(f"no function {name!r} is defined here; give --function one of: "
                         f"{near or '(no function definitions found)'}", path=sf.path)
    item = defs[0]
    node = _node_at(sf, item)
    decl = node.child_by_field_name("declarator")
    while decl is not None and decl.type != "function_declarator":
        decl = decl.child_by_field_name("declarator")
    plist = decl.child_by_field_name("parameters") if decl is not None else None
    params: list[Param] = []
    for p in (plist.named_children if plist is not None else []):
        if p.type == "comment":
            continue
        if p.type != "parameter_declaration":
            raise InputError(f"line {sf.line_of(p.start_byte)}: parameter "
                             f"{sf.data[p.start_byte:p.end_byte].decode()!r} is not supported "
                             "(variadic or default arguments); wrap the function in one with a "
                             "plain parameter list", path=sf.path)
        params.append(_param(sf, p))
    if len(params) == 1 and params[0].base == "void" and not params[0].pointer:
        params = []
    body = node.child_by_field_name("body")
    head = sf.data[item.start:body.start_byte] if body is not None else b""
    is_global = re.search(rb"\b__global__\b", head) is not None
    return Function(name, item.line, item.start, item.end,
                    body.start_byte if body is not None else item.end, params, is_global, item,
                    node)


def _node_at(sf: SourceFile, item: Item) -> Node:
    n = sf.tree.root_node.descendant_for_byte_range(item.node_start, item.end)
    while n is not None and not (n.start_byte == item.node_start and n.end_byte == item.end
                                 and n.type == item.node_type):
        n = n.parent
    if n is None:
        raise InputError(f"line {item.line}: cannot read this definition", path=sf.path)
    return n


def _param(sf: SourceFile, p: Node) -> Param:
    data = sf.data
    text = data[p.start_byte:p.end_byte].decode()
    line = sf.line_of(p.start_byte)
    ty = p.child_by_field_name("type")
    base = data[ty.start_byte:ty.end_byte].decode() if ty is not None else ""
    # `unsigned int`, `long long`: sized_type_specifier covers them as one node
    const = any(c.type == "type_qualifier" and data[c.start_byte:c.end_byte] == b"const"
                for c in p.named_children)
    pointer = 0
    sizes: list[str] = []  # array dimensions, the outermost declarator (the last one) first
    d = p.child_by_field_name("declarator")
    name = ""
    while d is not None:
        if d.type == "array_declarator":
            size = d.child_by_field_name("size")
            sizes.append(data[size.start_byte:size.end_byte].decode() if size else "")
            pointer += 1 if len(sizes) == 1 else 0
        elif d.type == "pointer_declarator":
            pointer += 1
        elif d.type == "reference_declarator":
            raise InputError(f"line {line}: reference parameter {text!r} is not supported; "
                             "pass a pointer", path=sf.path)
        if d.type == "identifier":
            name = data[d.start_byte:d.end_byte].decode()
            break
        nxt = d.child_by_field_name("declarator")
        if nxt is None:
            nxt = next((c for c in d.named_children if c.type in (
                "identifier", "pointer_declarator", "array_declarator",
                "parenthesized_declarator")), None)
        d = nxt
    if not name:
        raise InputError(f"line {line}: parameter {text!r} has no name; name it", path=sf.path)
    return Param(name=name, base=" ".join(base.split()), pointer=pointer, const=const,
                 text=text, line=line, dims=sizes[::-1][1:],
                 extent0=sizes[-1] if sizes else "")


class UnresolvedMacro(InputError):
    pass


def pick_definitions(sf: SourceFile, name: str, cands: list[tuple[SourceFile, Item]]
                     ) -> list[tuple[SourceFile, Item]]:
    """Which of several definitions of `name` the function gets: a macro's one definition
    outside #if (a name defined only under #if, more than once, depends on the build: the
    caller is told), else the function definition, its prototype and one declaration."""
    macros = [c for c in cands if c[1].node_type in ("preproc_def", "preproc_function_def")]
    if macros:
        plain = [m for m in macros if not m[1].conditional]
        if plain:
            return [plain[0]]
        if len(macros) == 1:
            return macros
        lines = ", ".join(str(m[1].line) for m in macros)
        raise UnresolvedMacro(
            f"line {macros[0][1].line}: macro {name} is defined only under #if/#ifdef, "
            f"{len(macros)} times (lines {lines}): which one applies depends on the build; "
            f"pass --define {name}=VALUE", path=sf.path)
    defs = [c for c in cands if c[1].node_type == "function_definition"]
    protos = [c for c in cands if c[1].is_prototype]
    others = [c for c in cands if c not in defs and c not in protos]
    out = defs[:1] + protos[:1]
    if others:
        out.append(others[0])
    return out


def system_includes(sf: SourceFile) -> list[tuple[str, int]]:
    """(header, line) of every `#include <...>` in the file, at any depth."""
    out = []
    for it in sf.items:
        if it.node_type == "preproc_include":
            m = re.search(r"<\s*([\w./]+)\s*>", it.text(sf.data))
            if m:
                out.append((m.group(1), it.line))
    return out


def join_continuations(text: str) -> str:
    """Backslash-newline joined, the way the preprocessor reads it first."""
    return re.sub(r"\\[ \t]*\r?\n", " ", text)
