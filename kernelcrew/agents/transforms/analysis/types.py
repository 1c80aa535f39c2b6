"""Element types as the file names them: `typedef double DATA_TYPE;` and `#define DATA_TYPE
double` resolved to the arithmetic type underneath, so a move that needs to know whether
an array holds floats or doubles (a local accumulator's type, a vector width) reads code
written with the code base's own type names as it reads `double`.

Only a name the file defines once, to a plain arithmetic type (or to another such name),
is resolved; a name defined under `#if` or twice (a build switch choosing the precision)
is left unresolved, and the moves that need the type stay away."""

from __future__ import annotations

import functools
import re

from kernelcrew.csource.syntax import Node, Source, walk

ARITHMETIC = frozenset({
    "float", "double", "long double", "int", "long", "long long", "short", "char",
    "unsigned", "unsigned int", "unsigned long", "unsigned long long", "unsigned short",
    "unsigned char", "signed char", "long int", "int8_t", "int16_t", "int32_t", "int64_t",
    "uint8_t", "uint16_t", "uint32_t", "uint64_t", "size_t", "ptrdiff_t", "_Float16",
})
INTEGERS = ARITHMETIC - {"float", "double", "long double", "_Float16"}
# integer types whose arithmetic does not wrap (plain `char`'s sign is the platform's)
SIGNED_INTEGERS = frozenset({"int", "long", "long long", "short", "long int", "signed char",
                             "int8_t", "int16_t", "int32_t", "int64_t", "ptrdiff_t"})
_QUALIFIERS = re.compile(r"\b(const|volatile|restrict|__restrict__|__restrict|register|"
                         r"static|struct)\b")
_CONDITIONAL = ("preproc_ifdef", "preproc_if", "preproc_else", "preproc_elif")


def _plain(text: str) -> str:
    return " ".join(_QUALIFIERS.sub(" ", text.replace("*", " ")).split())


@functools.lru_cache(maxsize=64)
def _aliases(text: str) -> dict[str, str | None]:
    """Name -> the type text it stands for (None: defined more than once or under #if)."""
    s = Source(text)
    out: dict[str, str | None] = {}

    def note(name: str, value: str, node: Node) -> None:
        p = node.parent
        conditional = p is not None and p.type in _CONDITIONAL
        out[name] = None if name in out or conditional else value

    for n in walk(s.root):
        if n.type == "type_definition":
            ty = n.child_by_field_name("type")
            decl = n.child_by_field_name("declarator")
            if ty is not None and decl is not None and decl.type == "type_identifier":
                note(decl.text.decode(), _plain(s.text_of(ty)), n)
        elif n.type == "preproc_def":
            name, value = n.child_by_field_name("name"), n.child_by_field_name("value")
            if name is not None and value is not None:
                note(name.text.decode(), _plain(s.text_of(value).strip()), n)
    return out


def resolve(s: Source, type_text: str) -> str | None:
    """The arithmetic type a type's text names (qualifiers, `*` and typedef or macro
    aliases taken off): `const DATA_TYPE` -> `double`; None when it is not one."""
    ty = _plain(type_text)
    aliases = _aliases(s.text)
    for _ in range(8):
        if ty in ARITHMETIC:
            return ty
        nxt = aliases.get(ty)
        if nxt is None:
            return None
        ty = nxt
    return None


def type_cast(s: Source, call: Node) -> bool:
    """`call` is a cast the grammar reads as a call: `(sample_t)(g * x[i])`, where the
    parenthesized name is a typedef or macro of an arithmetic type."""
    fn = call.child_by_field_name("function")
    args = call.child_by_field_name("arguments")
    return fn is not None and fn.type == "parenthesized_expression" and \
        args is not None and len(args.named_children) == 1 and \
        resolve(s, s.text_of(fn)[1:-1]) is not None


def decl_type(s: Source, decl: Node) -> str | None:
    """The resolved arithmetic type of a declaration or parameter declaration."""
    ty = decl.child_by_field_name("type")
    return resolve(s, s.text_of(ty)) if ty is not None else None
