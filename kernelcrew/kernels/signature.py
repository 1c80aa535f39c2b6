"""The CPU entry's C signature, from op.yaml, and a check of a source against it.

The harness calls a CPU kernel through ctypes with, in order: a pointer per input, a
pointer per output, each scalar by value in its dtype, each size as a 64-bit integer
(`kernelcrew.tools.worker`). A kernel whose entry takes other parameters would read
garbage or crash, so the entry's parameters are checked before anything is compiled:
their number, pointer or value, const-ness (an output must be writable), the element
type of each pointer and the type of each value. Names do not matter.
"""

from __future__ import annotations

import re
from typing import Any

from kernelcrew.kernels.spec import OpSpec
from kernelcrew.kernels.text import split_top

_QUALIFIERS = {"const", "volatile", "__restrict__", "__restrict", "restrict", "register",
               "struct", "signed"}
# C type words -> (kind, bytes): "f" floating point, "i" integer
_CTYPES: dict[str, tuple[str, int]] = {
    "float": ("f", 4), "double": ("f", 8), "_Float16": ("f", 2), "__fp16": ("f", 2),
    "uint8_t": ("i", 1), "std::uint8_t": ("i", 1), "unsigned char": ("i", 1),
    "int8_t": ("i", 1), "std::int8_t": ("i", 1), "char": ("i", 1),
    "uint16_t": ("i", 2), "std::uint16_t": ("i", 2), "unsigned short": ("i", 2),
    "short": ("i", 2), "int16_t": ("i", 2),
    "int": ("i", 4), "unsigned": ("i", 4), "unsigned int": ("i", 4), "int32_t": ("i", 4),
    "uint32_t": ("i", 4), "std::int32_t": ("i", 4),
    "long": ("i", 8), "long int": ("i", 8), "unsigned long": ("i", 8), "long long": ("i", 8),
    "long long int": ("i", 8), "unsigned long long": ("i", 8), "int64_t": ("i", 8),
    "uint64_t": ("i", 8), "std::int64_t": ("i", 8), "size_t": ("i", 8),
    "std::size_t": ("i", 8), "ptrdiff_t": ("i", 8), "std::ptrdiff_t": ("i", 8),
    "intptr_t": ("i", 8), "ssize_t": ("i", 8),
}
_DTYPE = {"float32": (("f", 4), "float"), "float64": (("f", 8), "double"),
          "float16": (("i", 2), "uint16_t"), "int32": (("i", 4), "int32_t"),
          "int64": (("i", 8), "int64_t"), "uint8": (("i", 1), "uint8_t"),
          "int8": (("i", 1), "int8_t"), "uint16": (("i", 2), "uint16_t"),
          "int16": (("i", 2), "int16_t"), "uint32": (("i", 4), "uint32_t")}
_FLOAT16_OK = {("f", 2), ("i", 2)}  # a float16 tensor is passed as 16-bit storage


def entry_params(spec: OpSpec) -> list[dict[str, str]]:
    """What the harness passes, in order: name, kind (input/output/scalar/size), dtype."""
    out = [{"name": n, "kind": "input", "dtype": t.dtype} for n, t in spec.inputs.items()]
    out += [{"name": n, "kind": "output", "dtype": t.dtype} for n, t in spec.outputs.items()]
    out += [{"name": n, "kind": "scalar", "dtype": s.dtype} for n, s in spec.scalars.items()]
    out += [{"name": n, "kind": "size", "dtype": "int64"} for n in spec.sizes]
    return out


def declaration(params: list[dict[str, str]], entry: str) -> str:
    """The C declaration the harness calls, e.g. `extern "C" void vadd(const float* x, ...)`."""
    parts = []
    for p in params:
        ctype = _DTYPE.get(p["dtype"], (None, p["dtype"]))[1]
        if p["kind"] == "input":
            parts.append(f"const {ctype}* {p['name']}")
        elif p["kind"] == "output":
            parts.append(f"{ctype}* {p['name']}")
        else:
            parts.append(f"{ctype} {p['name']}")
    return f'extern "C" void {entry}({", ".join(parts)})'


def _strip_comments(text: str) -> str:
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.DOTALL)
    return re.sub(r"//[^\n]*", " ", text)


def entry_parameters(source: str, entry: str) -> list[str] | None:
    """The parameter declarations of the definition of `entry`, or None if not defined."""
    body = _strip_comments(source)
    for m in re.finditer(rf"\b{re.escape(entry)}\s*\(", body):
        depth, i = 1, m.end()
        while i < len(body) and depth:
            depth += {"(": 1, ")": -1}.get(body[i], 0)
            i += 1
        if depth:
            return None
        after = body[i:i + 200].lstrip()
        after = re.sub(r"^(?:noexcept|throw\s*\(\s*\)|__attribute__\s*\(\(.*?\)\))\s*", "",
                       after)
        if not after.startswith("{"):
            continue  # a call or a declaration: look for the definition
        inner = body[m.end():i - 1]
        *parts, last = [p.strip() for p in split_top(inner, "(<[")]
        if last and last != "void":
            parts.append(last)
        return parts
    return None


def _describe(decl: str) -> tuple[bool, bool, tuple[str, int] | None]:
    """(pointer, const pointee, (kind, bytes) of the base type or None when unknown)."""
    pointer = "*" in decl or "[" in decl
    head = decl.split("*")[0] if "*" in decl else re.sub(r"\[.*$", "", decl)
    const = bool(re.search(r"\bconst\b", head))
    words = [w for w in re.findall(r"[A-Za-z_][\w:]*", head) if w not in _QUALIFIERS]
    for n in (len(words), len(words) - 1):
        t = " ".join(words[:n])
        if n > 0 and t in _CTYPES:
            return pointer, const, _CTYPES[t]
    return pointer, const, None


def check_entry(source: str, entry: str, params: list[dict[str, str]]) -> str:
    """Why the source's entry does not take what the harness passes ("" when it does)."""
    got = entry_parameters(source, entry)
    want = declaration(params, entry)
    if got is None:
        return f"the source does not define the entry function `{entry}`; it must be: {want}"
    if len(got) != len(params):
        return (f"the entry `{entry}` takes {len(got)} parameters, the operator passes "
                f"{len(params)}: {want}")
    for k, (decl, p) in enumerate(zip(got, params, strict=True), 1):
        pointer, const, base = _describe(decl)
        want_base, ctype = _DTYPE.get(p["dtype"], (None, p["dtype"]))
        where = f"parameter {k} of `{entry}` (`{decl}`) receives {p['kind']} {p['name']!r}"
        if p["kind"] in ("input", "output"):
            if not pointer:
                return f"{where}, an array: declare it as a pointer; the signature is {want}"
            if p["kind"] == "output" and const:
                return f"{where}, an output: it must not be const; the signature is {want}"
        elif pointer:
            return f"{where}, passed by value: declare it without `*`; the signature is {want}"
        if base is not None and want_base is not None and base != want_base and not (
                p["dtype"] == "float16" and base in _FLOAT16_OK):
            return f"{where} of type {ctype}; the signature is {want}"
    return ""


def params_json(spec: OpSpec) -> list[dict[str, Any]]:
    return [dict(p) for p in entry_params(spec)]
