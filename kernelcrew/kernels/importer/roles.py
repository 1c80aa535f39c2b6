"""What each parameter of an imported function is: an input or output array (or one read
and written), a float scalar, or an integer size; and each array's element type.

Types are read after the preprocessor (`DATA_TYPE` -> `double`) and through the unit's
typedefs (`typedef double DATA_TYPE;`, `typedef uint8_t pixel;`), for arrays and scalars
alike. Roles come from `const`, from `--inputs`/`--outputs`, and where neither says, from
what the code does (access.py): an array never written is an input; one written before
anything reads it an output; one read before it is written (or handed to code that
cannot be read) both.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from kernelcrew.errors import InputError
from kernelcrew.kernels.importer.access import Accesses
from kernelcrew.kernels.importer.source import Function, Param, SourceFile, parse, walk

DTYPE_OF = {"float": "float32", "double": "float64", "int": "int32", "int32_t": "int32",
            "int64_t": "int64", "long long": "int64", "long": "int64", "long int": "int64",
            "long long int": "int64", "_Float16": "float16", "__fp16": "float16",
            "uint8_t": "uint8", "unsigned char": "uint8", "int8_t": "int8",
            "signed char": "int8", "uint16_t": "uint16", "unsigned short": "uint16",
            "int16_t": "int16", "short": "int16", "uint32_t": "uint32", "unsigned": "uint32",
            "unsigned int": "uint32", "signed int": "int32", "signed": "int32"}
C_TYPE = {"float32": "float", "float64": "double", "int32": "int32_t", "int64": "int64_t",
          "float16": "_Float16", "uint8": "uint8_t", "int8": "int8_t", "uint16": "uint16_t",
          "int16": "int16_t", "uint32": "uint32_t"}
ITEMSIZE = {"float32": 4, "float64": 8, "int32": 4, "int64": 8, "float16": 2, "uint8": 1,
            "int8": 1, "uint16": 2, "int16": 2, "uint32": 4}
SIZE_TYPES = {  # C type of an integer parameter -> (min, max) the entry checks, or None
    "int": ("INT_MIN", "INT_MAX"), "int32_t": ("INT32_MIN", "INT32_MAX"),
    "signed int": ("INT_MIN", "INT_MAX"), "signed": ("INT_MIN", "INT_MAX"),
    "unsigned": ("0", "UINT_MAX"), "unsigned int": ("0", "UINT_MAX"),
    "uint32_t": ("0", "UINT32_MAX"), "size_t": ("0", None), "uint64_t": ("0", None),
    "unsigned long": ("0", None), "unsigned long long": ("0", None),
    "long": None, "long long": None, "int64_t": None, "ptrdiff_t": None, "ssize_t": None,
    "long int": None, "long long int": None, "short": ("SHRT_MIN", "SHRT_MAX"),
}
INT_LIMITS = {"INT_MIN": -2**31, "INT_MAX": 2**31 - 1, "INT32_MIN": -2**31,
              "INT32_MAX": 2**31 - 1, "UINT_MAX": 2**32 - 1, "UINT32_MAX": 2**32 - 1,
              "SHRT_MIN": -2**15, "SHRT_MAX": 2**15 - 1, "0": 0}
FLOAT_SCALARS = {"float": "float32", "double": "float64"}
# a float parameter with no --scalar gets one of these (distinct, so swapped arguments show)
DEFAULT_SCALARS = (1.5, 1.2, 0.8, 0.6, 1.1, 0.9)
_KNOWN = set(DTYPE_OF) | set(SIZE_TYPES) | set(FLOAT_SCALARS)


@dataclass
class Role:
    param: Param  # as the compiler sees it (macros expanded)
    kind: str  # input | output | inout | scalar | size
    dtype: str = ""
    shape: list[str] = field(default_factory=list)
    value: float | None = None  # scalars
    ctype: str = ""  # the resolved C type (`double` for `DATA_TYPE`)


def err(sf: SourceFile, line: int, msg: str) -> InputError:
    return InputError(f"line {line}: {msg}", path=sf.path)


def base_type(p: Param) -> str:
    b = re.sub(r"\b(const|volatile|restrict|__restrict__|__restrict|struct|register)\b", "",
               p.base)
    return " ".join(b.split())


def typedef_table(text: str) -> dict[str, str]:
    """`typedef T NAME;` of a unit (NAME -> T), plain types only (no pointers, arrays)."""
    tree = parse(text)
    data = text.encode()
    out: dict[str, str] = {}
    for n in walk(tree.root_node):
        if n.type != "type_definition":
            continue
        ty = n.child_by_field_name("type")
        for d in n.children_by_field_name("declarator"):
            if d.type == "type_identifier" and ty is not None:
                quals = " ".join(data[c.start_byte:c.end_byte].decode()
                                 for c in n.named_children if c.type == "type_qualifier")
                t = data[ty.start_byte:ty.end_byte].decode()
                out[data[d.start_byte:d.end_byte].decode()] = " ".join(f"{quals} {t}".split())
    return out


def array_typedefs(text: str) -> dict[str, tuple[str, bool, list[str]]]:
    """`typedef T NAME[D1][D2]...;` of a unit: NAME -> (T, const, [D1, D2, ...])."""
    tree = parse(text)
    data = text.encode()
    out: dict[str, tuple[str, bool, list[str]]] = {}
    for n in walk(tree.root_node):
        ty = n.child_by_field_name("type") if n.type == "type_definition" else None
        if ty is None:
            continue
        const = any(data[c.start_byte:c.end_byte].decode() == "const"
                    for c in n.named_children if c.type == "type_qualifier")
        for d in n.children_by_field_name("declarator"):
            dims: list[str] = []
            while d is not None and d.type == "array_declarator":
                size = d.child_by_field_name("size")
                if size is None:  # `typedef float v[];`: no extent to give
                    break
                dims.insert(0, " ".join(data[size.start_byte:size.end_byte].decode().split()))
                d = d.child_by_field_name("declarator")
            if dims and d is not None and d.type == "type_identifier":
                out[data[d.start_byte:d.end_byte].decode()] = (
                    data[ty.start_byte:ty.end_byte].decode(), const, dims)
    return out


def with_array_typedefs(params: list[Param], table: dict[str, tuple[str, bool, list[str]]]
                        ) -> None:
    """A parameter typed by an array typedef, as the compiler reads it: `matrix A` with
    `typedef long matrix[N][M]` is `long A[N][M]`, `matrix *A` is `long (*A)[N][M]`."""
    for p in params:
        words = re.sub(r"\b(const|volatile|register)\b", "", p.base).split()
        if len(words) != 1 or words[0] not in table or p.pointer > 1:
            continue
        base, const, dims = table[words[0]]
        if p.pointer == 0:
            p.extent0, p.dims = dims[0], dims[1:]
        else:
            p.dims = p.dims + dims
        p.base, p.pointer, p.const = base, 1, p.const or const


def resolve_type(name: str, typedefs: dict[str, str]) -> str:
    """A type name followed through typedefs until a type the importer knows."""
    seen = set()
    cur = name
    while cur not in _KNOWN and cur in typedefs and cur not in seen:
        seen.add(cur)
        cur = re.sub(r"\b(const|volatile)\b", "", typedefs[cur]).strip()
        cur = " ".join(cur.split())
    return cur


@dataclass
class RoleFlags:
    inputs: list[str]
    outputs: list[str]
    scalars: dict[str, str]
    shapes: dict[str, str]
    cases: list[dict[str, int]]


def check_names(sf: SourceFile, fn: Function, flags: RoleFlags) -> None:
    names = {p.name for p in fn.params}
    for flag, given in (("--inputs", flags.inputs), ("--outputs", flags.outputs),
                        ("--shape", flags.shapes), ("--scalar", flags.scalars)):
        bad = [n for n in given if n not in names]
        if bad:
            raise err(sf, fn.line, f"{flag} names {', '.join(bad)}, which {fn.name} does not "
                                   f"take; its parameters are {', '.join(sorted(names))}")


def assign_roles(sf: SourceFile, fn: Function, xfn: Function, typedefs: dict[str, str],
                 acc: Accesses, flags: RoleFlags, notes: list[str]) -> list[Role]:
    """Roles of `fn`'s parameters; `xfn` is the same function with macros expanded."""
    check_names(sf, xfn, flags)
    roles: list[Role] = []
    inferred: dict[str, list[str]] = {}
    n_scalars = 0
    for p in xfn.params:
        p0 = p  # its line is the file's (derive sets it); its text as the compiler sees it
        ctype = resolve_type(base_type(p), typedefs)
        if p.pointer > 1:
            raise err(sf, p0.line, f"parameter {p0.text!r}: pointers to pointers are not "
                                   "supported; import a function that takes flat arrays")
        if p.pointer:
            dtype = DTYPE_OF.get(ctype)
            if dtype is None:
                raise err(sf, p0.line, f"parameter {p0.text!r}: arrays of {ctype!r} are not "
                                       "supported (float, double, _Float16 and the 8- to "
                                       "64-bit integers of stdint.h only)")
            kind, why = _array_role(sf, fn, p, acc, flags)
            if why:
                inferred.setdefault(why, []).append(p.name)
            roles.append(Role(p, kind, dtype, ctype=ctype))
        elif ctype in SIZE_TYPES:
            missing = [i for i, c in enumerate(flags.cases) if p.name not in c]
            if missing:
                raise err(sf, p0.line, f"size {p.name!r} has no value in --case "
                                       f"{missing[0] + 1}; add {p.name}=VALUE to every --case")
            roles.append(Role(p, "size", "int64", ctype=ctype))
        elif ctype in FLOAT_SCALARS:
            if p.name in flags.scalars:
                try:
                    value = float(flags.scalars[p.name])
                except ValueError:
                    raise InputError(f"--scalar {p.name}={flags.scalars[p.name]!r} is not a "
                                     "number", field="--scalar") from None
            else:
                value = DEFAULT_SCALARS[n_scalars % len(DEFAULT_SCALARS)]
                n_scalars += 1
                notes.append(f"{p.name} is a {ctype} scalar and no --scalar gives it: "
                             f"{value} is used (give --scalar {p.name}=VALUE)")
            roles.append(Role(p, "scalar", FLOAT_SCALARS[ctype], value=value, ctype=ctype))
        else:
            raise err(sf, p0.line, f"parameter {p0.text!r}: type {ctype!r} is not supported "
                                   "(float/double/int arrays, integer sizes, float scalars)")
    for why, names in inferred.items():
        notes.append(f"{', '.join(names)}: {why}")
    _check_cases(fn, roles, flags)
    return roles


def _array_role(sf: SourceFile, fn: Function, p: Param, acc: Accesses, flags: RoleFlags
                ) -> tuple[str, str]:
    """(role, why when inferred from the code)."""
    if p.name in flags.inputs and p.name in flags.outputs:
        return "inout", ""
    if p.name in flags.outputs:
        if p.const:
            raise err(sf, p.line, f"parameter {p.text!r} is const: it cannot be an output; "
                                  "remove it from --outputs")
        return "output", ""
    if p.name in flags.inputs or p.const:
        return "input", ""
    written = acc.written(p.name)
    if written is False:
        # never stored through nor handed to code that writes: an input (old C rarely says
        # const; the harness checks after every run that inputs are unchanged)
        return "input", "never written: inputs"
    if written is True and not acc.read_first(p.name):
        return "output", ("written before anything reads them: outputs (give --inputs NAME "
                          "too where the incoming values matter)")
    if written is True:
        return "inout", "read and written: both inputs and outputs"
    raise role_error(sf, fn, p, acc, flags)


def role_error(sf: SourceFile, fn: Function, p: Param, acc: Accesses, flags: RoleFlags
               ) -> InputError:
    """One line for a pointer whose role the code does not show, with the flags to add."""
    e = next((e for e in acc.escapes if e.array == p.name and e.written is None), None)
    how = f"{e.how} at line {e.line}" if e is not None else "its use cannot be followed"
    return err(sf, p.line, f"the role of {p.name} cannot be inferred (not const; {how}, "
                           "code that cannot be read here): add --outputs "
                           f"{p.name} if it is written, --inputs {p.name} if only read (an "
                           "array in both lists is read and written)")


def _check_cases(fn: Function, roles: list[Role], flags: RoleFlags) -> None:
    sizes = {r.param.name for r in roles if r.kind == "size"}
    for i, c in enumerate(flags.cases):
        extra = set(c) - sizes
        if extra:
            raise InputError(f"--case {i + 1} gives {sorted(extra)}, which are not integer "
                             f"parameters of {fn.name} ({', '.join(sorted(sizes))})",
                             field="--case")
