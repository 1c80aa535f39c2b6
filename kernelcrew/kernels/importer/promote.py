"""Promote C/C++ code from float to double on its tree-sitter tree, and say where that
changes what the code computes.

The rewrite works on syntax nodes, never on the raw text: `float` type specifiers become
`double`, float literals lose their `f` suffix, float-only math functions become their
double versions (`expf` -> `exp`), `FLT_` limits become `DBL_` limits, and macro bodies are
parsed and rewritten the same way. Where promotion changes semantics rather than
precision it records a warning with the original line: integer conversions of float
values, bit tricks (unions, integer pointers to floats, memcpy, reinterpret_cast,
32-bit patterns), `sizeof(float)`, and float-specific constants.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from kernelcrew.kernels.importer.source import Node, parse, walk

FLOAT_MATH = {f"{n}f": n for n in (
    "exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "sqrt", "cbrt", "pow", "hypot",
    "sin", "cos", "tan", "asin", "acos", "atan", "atan2", "sinh", "cosh", "tanh", "asinh",
    "acosh", "atanh", "erf", "erfc", "tgamma", "lgamma", "fabs", "fmax", "fmin", "fmod",
    "remainder", "fma", "floor", "ceil", "round", "trunc", "rint", "nearbyint", "copysign",
    "ldexp", "frexp", "modf", "scalbn", "nextafter", "fdim", "logb", "ilogb")}
FLOAT_MATH.update({"__builtin_expf": "__builtin_exp", "__builtin_sqrtf": "__builtin_sqrt",
                   "__builtin_fabsf": "__builtin_fabs", "__builtin_fmaf": "__builtin_fma",
                   "__builtin_inff": "__builtin_inf", "__builtin_nanf": "__builtin_nan",
                   "__builtin_huge_valf": "__builtin_huge_val"})
TO_INT_MATH = {"lrintf", "llrintf", "lroundf", "llroundf", "ilogbf"}
FLT_LIMITS = {"FLT_MAX": "DBL_MAX", "FLT_MIN": "DBL_MIN", "FLT_EPSILON": "DBL_EPSILON",
              "FLT_TRUE_MIN": "DBL_TRUE_MIN", "FLT_MANT_DIG": "DBL_MANT_DIG",
              "FLT_DIG": "DBL_DIG", "FLT_MAX_EXP": "DBL_MAX_EXP", "FLT_MIN_EXP": "DBL_MIN_EXP",
              "FLT_MAX_10_EXP": "DBL_MAX_10_EXP", "FLT_MIN_10_EXP": "DBL_MIN_10_EXP",
              "HUGE_VALF": "HUGE_VAL"}
INT_TYPES = {"int", "long", "short", "char", "unsigned", "signed", "bool", "int8_t", "int16_t",
             "int32_t", "int64_t", "uint8_t", "uint16_t", "uint32_t", "uint64_t", "size_t",
             "ssize_t", "ptrdiff_t", "intptr_t", "uintptr_t", "long long", "unsigned int",
             "unsigned long", "unsigned char", "unsigned short", "long int", "unsigned long long"}
FLOAT_TYPES = {"float", "double", "long double", "_Float16", "__fp16", "half", "__half"}
_FLOAT_LIT = re.compile(r"^(?:\d+\.\d*|\.\d+|\d+)(?:[eE][+-]?\d+)?[fF]$|"
                        r"^(?:\d+\.\d*|\.\d+)(?:[eE][+-]?\d+)?$|^\d+[eE][+-]?\d+$|"
                        r"^0[xX][0-9a-fA-F.]*[pP][+-]?\d+[fF]?$")
_MEMCPY = {"memcpy", "memmove", "__builtin_memcpy", "__builtin_memmove", "bit_cast",
           "__builtin_bit_cast"}


@dataclass
class Promoted:
    text: str
    warnings: list[str]
    changes: int  # nodes rewritten


def _is_float_literal(t: str) -> bool:
    # tree-sitter's literal may carry its sign (`-2.f`)
    return bool(_FLOAT_LIT.match(t.replace("'", "").lstrip("+-")))


def promote(text: str, *, first_line: int = 1, where: str = "") -> Promoted:
    """`text` (C/C++ code) with float promoted to double; warnings name `where:line`."""
    p = _Promoter(text, first_line, where)
    for n in walk(p.tree.root_node):
        handler = _HANDLERS.get(n.type)
        if handler is not None:
            handler(p, n)
    return Promoted(_apply(p.data, p.edits), p.warnings, len(p.edits))


class _Promoter:
    """One promotion: the edits made so far and the warnings, per syntax node."""

    def __init__(self, text: str, first_line: int, where: str) -> None:
        self.data = text.encode()
        self.tree = parse(text)
        self.first_line, self.where = first_line, where
        self.edits: list[tuple[int, int, str]] = []
        self.warnings: list[str] = []
        self.floats = float_names(self.tree.root_node, self.data)

    def src(self, n: Node) -> str:
        return self.data[n.start_byte:n.end_byte].decode()

    def line(self, n: Node) -> int:
        return self.first_line + n.start_point.row

    def warn(self, n: Node, msg: str) -> None:
        w = f"{self.where}:{self.line(n)}: {msg}"
        if w not in self.warnings:
            self.warnings.append(w)

    def floaty(self, n: Node) -> bool:
        for m in walk(n):
            if m.type == "number_literal" and _is_float_literal(self.src(m)):
                return True
            if m.type == "identifier" and (self.src(m) in self.floats
                                           or self.src(m) in FLOAT_MATH):
                return True
            if m.type == "primitive_type" and self.src(m) in ("float", "double"):
                return True
        return False

    def primitive_type(self, n: Node) -> None:
        if self.src(n) != "float":
            return
        self.edits.append((n.start_byte, n.end_byte, "double"))
        if n.parent is not None and n.parent.type == "type_descriptor" and \
                n.parent.parent is not None and n.parent.parent.type == "sizeof_expression":
            self.warn(n, "sizeof(float) becomes sizeof(double) in the float64 reference; byte "
                         "counts computed from it change")

    def number_literal(self, n: Node) -> None:
        s = self.src(n)
        if _is_float_literal(s):
            if s[-1] in "fF":  # hex integers never match: a hex float needs its `p`
                self.edits.append((n.end_byte - 1, n.end_byte, ""))
            try:
                v = abs(float(s.rstrip("fF"))) if "x" not in s.lower() else None
            except ValueError:
                v = None
            if v is not None and (v >= 1e38 or 0 < v < 1.2e-38):
                self.warn(n, f"float-specific constant {s} (near the float range limits): in "
                             "float64 it is an ordinary number, so overflow/underflow guards "
                             "built on it behave differently")
        elif re.fullmatch(r"0[xX][0-9a-fA-F]{8}[uUlL]*", s) and self.floats:
            self.warn(n, f"32-bit pattern {s} in code that uses floats: if it is a float's bit "
                         "pattern, the float64 reference does not reproduce it")

    def identifier(self, n: Node) -> None:
        s = self.src(n)
        if s in FLOAT_MATH:
            self.edits.append((n.start_byte, n.end_byte, FLOAT_MATH[s]))
        elif s in FLT_LIMITS:
            self.edits.append((n.start_byte, n.end_byte, FLT_LIMITS[s]))
            self.warn(n, f"float-specific constant {s} becomes {FLT_LIMITS[s]} in the float64 "
                         "reference")
        elif s in TO_INT_MATH:
            self.edits.append((n.start_byte, n.end_byte, s[:-1]))
            self.warn(n, f"{s} converts a float to an integer: rounding of the float64 value "
                         "can differ by one")

    def cast_expression(self, n: Node) -> None:
        ty = n.child_by_field_name("type")
        val = n.child_by_field_name("value")
        tys = " ".join(self.src(ty).split()) if ty is not None else ""
        pointer = "*" in tys
        base = tys.replace("*", "").replace("const", "").replace("volatile", "").strip()
        if val is None or not self.floaty(val):
            return
        if pointer and base not in FLOAT_TYPES and base != "void":
            self.warn(n, f"bit trick: {self.src(n)[:60]!r} reads a float's bytes as {base}; "
                         "the float64 reference reads a double's")
        elif not pointer and base in INT_TYPES:
            self.warn(n, f"integer cast of a float value {self.src(n)[:60]!r}: the float64 "
                         "value can truncate to a different integer")

    def call(self, n: Node) -> None:
        t = n.type
        fn = n.child_by_field_name("function") if t == "call_expression" else n
        name = self.src(fn).split("<")[0].split("::")[-1].strip() if fn is not None else ""
        if name == "reinterpret_cast" or (t == "call_expression" and name in _MEMCPY
                                          and self.floaty(n)):
            self.warn(n, f"bit trick: {self.src(n)[:60]!r} copies or reinterprets float bytes; "
                         "the float64 reference works on doubles")
        if t == "call_expression" and name == "static_cast" and fn is not None:
            targ = self.src(fn)
            inner = targ[targ.find("<") + 1:targ.rfind(">")].strip() if "<" in targ else ""
            args = n.child_by_field_name("arguments")
            if inner in INT_TYPES and args is not None and self.floaty(args):
                self.warn(n, f"integer cast of a float value {self.src(n)[:60]!r}: the float64 "
                             "value can truncate to a different integer")

    def union_specifier(self, n: Node) -> None:
        if self.floaty(n):
            self.warn(n, "union holding a float (type punning): the float64 reference holds a "
                         "double there, so reading its other members gives different bits")

    def init_declarator(self, n: Node) -> None:
        decl = n.parent
        ty = decl.child_by_field_name("type") if decl is not None else None
        val = n.child_by_field_name("value")
        d = n.child_by_field_name("declarator")
        if ty is not None and " ".join(self.src(ty).split()) in INT_TYPES and d is not None \
                and d.type == "identifier" and val is not None and \
                _floaty_value(val, self.floaty):
            self.warn(n, f"implicit integer conversion of a float value {self.src(n)[:60]!r}: "
                         "the float64 value can truncate to a different integer")

    def preproc_arg(self, n: Node) -> None:
        body = self.src(n)
        sub = promote_fragment(body, first_line=self.line(n), where=self.where)
        if sub.text != body:
            self.edits.append((n.start_byte, n.end_byte, sub.text))
        for w in sub.warnings:
            if w not in self.warnings:
                self.warnings.append(w)


_HANDLERS = {"primitive_type": _Promoter.primitive_type,
             "number_literal": _Promoter.number_literal, "identifier": _Promoter.identifier,
             "cast_expression": _Promoter.cast_expression, "template_function": _Promoter.call,
             "call_expression": _Promoter.call, "union_specifier": _Promoter.union_specifier,
             "init_declarator": _Promoter.init_declarator, "preproc_arg": _Promoter.preproc_arg}


def _floaty_value(val: Node, floaty) -> bool:
    # `int i = n * 2;` is not a conversion; `int k = x * 10.0f;` is
    return floaty(val) and val.type not in ("sizeof_expression",)


def promote_fragment(body: str, *, first_line: int, where: str) -> Promoted:
    """A macro body: parsed inside a function body so expressions and statements both parse."""
    pre = "void __kc_macro__() {\n"
    res = promote(pre + body + "\n;}", first_line=first_line - 1, where=where)
    text = res.text
    if not text.startswith(pre) or not text.endswith("\n;}"):
        return Promoted(body, res.warnings, 0)
    return Promoted(text[len(pre):-3], res.warnings, res.changes)


def float_names(root: Node, data: bytes, extra_types: frozenset[str] = frozenset()
                ) -> set[str]:
    """Names declared with a floating-point type (variables, parameters, pointers); a
    typedef of one is named in `extra_types`."""
    out: set[str] = set()
    types = FLOAT_TYPES | extra_types
    for n in walk(root):
        if n.type in ("declaration", "parameter_declaration", "field_declaration"):
            ty = n.child_by_field_name("type")
            if ty is None or data[ty.start_byte:ty.end_byte].decode() not in types:
                continue
            for d in n.children_by_field_name("declarator"):
                m = d
                while m is not None and m.type not in ("identifier", "field_identifier"):
                    nxt = m.child_by_field_name("declarator")
                    m = nxt if nxt is not None else next(
                        (c for c in m.named_children if c.type in ("identifier",
                         "field_identifier", "pointer_declarator", "array_declarator",
                         "init_declarator")), None)
                if m is not None:
                    out.add(data[m.start_byte:m.end_byte].decode())
    return out


def _apply(data: bytes, edits: list[tuple[int, int, str]]) -> str:
    edits = sorted(set(edits), key=lambda e: (e[0], e[1]))
    out, pos = [], 0
    for s, e, t in edits:
        if s < pos:
            continue  # nested inside an edit already made (cannot happen for these nodes)
        out.append(data[pos:s])
        out.append(t.encode())
        pos = e
    out.append(data[pos:])
    return b"".join(out).decode()
