"""The generated parts of an imported baseline: the `extern "C"` entry in kernelcrew's
calling convention (inputs, outputs, scalars, int64_t sizes) that narrows each size with a
range check and calls the original function, the preamble (includes, C-to-C++ shims, the
build's -D defines), the front matter, and the assembly of the file with a map from its
lines back to the original files."""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from pathlib import Path

from kernelcrew.errors import InputError
from kernelcrew.kernels.expr import parse_expr
from kernelcrew.kernels.importer.cuda import emulation_entry
from kernelcrew.kernels.importer.roles import C_TYPE, DTYPE_OF, SIZE_TYPES, Role
from kernelcrew.kernels.importer.source import Function, Item, SourceFile
from kernelcrew.kernels.policy import CPU_INCLUDES, CUDA_INCLUDES
from kernelcrew.kernels.text import split_top

ALWAYS = ["stdint.h", "stddef.h", "climits"]
CXX_HEADER = {"float.h": "cfloat", "limits.h": "climits", "string.h": "cstring",
              "stdlib.h": "cstdlib",
              # x86 intrinsics by ISA level: immintrin.h declares them all
              **{h: "immintrin.h" for h in ("mmintrin.h", "xmmintrin.h", "emmintrin.h",
                                           "pmmintrin.h", "tmmintrin.h", "smmintrin.h",
                                           "nmmintrin.h", "wmmintrin.h", "x86intrin.h")}}
_PLAIN = set(C_TYPE.values()) | set(DTYPE_OF)


def signature_order(roles: list[Role], ret: str | None) -> list[tuple[str, str, str]]:
    """(name, kind, dtype) in op.yaml order, inouts split into NAME_in and NAME."""
    out = []
    for r in roles:
        if r.kind == "input":
            out.append((r.param.name, "input", r.dtype))
        elif r.kind == "inout":
            out.append((f"{r.param.name}_in", "input", r.dtype))
    for r in roles:
        if r.kind in ("output", "inout"):
            out.append((r.param.name, "output", r.dtype))
    if ret is not None:
        out.append(("result", "output", DTYPE_OF[ret]))
    return out


def c_expr(e: str) -> str:
    """An op.yaml expression (sizes, + - * // %, min, max, ceil_div) as C on int64_t."""
    return _c(parse_expr(e))


_C_OPS = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.FloorDiv: "/", ast.Mod: "%"}


def _c(n: ast.expr) -> str:
    if isinstance(n, ast.Constant):
        return str(n.value)
    if isinstance(n, ast.Name):
        return f"(int64_t){n.id}"
    if isinstance(n, ast.UnaryOp):
        return f"(-{_c(n.operand)})" if isinstance(n.op, ast.USub) else _c(n.operand)
    if isinstance(n, ast.BinOp):
        return f"({_c(n.left)} {_C_OPS[type(n.op)]} {_c(n.right)})"
    if isinstance(n, ast.Call):
        a = [_c(x) for x in n.args]
        if n.func.id == "ceil_div":
            return f"(({a[0]} + {a[1]} - 1) / {a[1]})"
        out = a[0]
        for b in a[1:]:  # min/max of several, pairwise
            cmp = ">" if n.func.id == "max" else "<"
            out = f"({out} {cmp} {b} ? {out} : {b})"
        return out
    raise InputError(f"cannot write {ast.unparse(n)!r} in C", field="--shape")


@dataclass
class EntrySpec:
    fn: Function  # the function as written (its name and parameter order)
    roles: list[Role]
    entry: str
    ret: str | None
    cuda: bool = False
    launch: tuple[list[str], list[str]] | None = None  # with float64: the CPU emulation
    orig: dict[str, tuple[str, list[str]]] = field(default_factory=dict)  # name -> (base,
    # dims) as written, where the written declaration reads as a plain array
    flat: set[str] = field(default_factory=set)  # VLA parameters lowered to flat pointers


def entry_text(spec: EntrySpec, *, float64: bool) -> str:
    """The generated entry: CPU, CUDA `__global__` (`cuda`), or the CPU emulation of a CUDA
    launch (`launch`, float64 reference)."""
    def ctype(dtype: str) -> str:
        return "double" if float64 and dtype in ("float32", "float16") else C_TYPE[dtype]

    decl = [f"const {ctype(d)}* {n}" if k == "input" else f"{ctype(d)}* {n}"
            for n, k, d in signature_order(spec.roles, spec.ret)]
    args: dict[str, str] = {}
    pre: list[str] = []
    for r in spec.roles:
        if r.kind in ("input", "output", "inout"):
            args[r.param.name] = _array_arg(spec, r, ctype, pre)
    for r in spec.roles:
        if r.kind == "scalar":
            decl.append(f"{'double' if float64 else C_TYPE[r.dtype]} {r.param.name}")
            args[r.param.name] = r.param.name
    for r in spec.roles:
        if r.kind == "size":
            decl.append(f"{'long long' if spec.cuda else 'int64_t'} {r.param.name}")
            args[r.param.name] = _size_arg(spec, r, pre)
    call = f"{spec.fn.name}({', '.join(args[r.param.name] for r in spec.roles)})"
    if spec.launch is not None and float64:
        return emulation_entry(spec.entry, decl, call, pre, *spec.launch)
    body = "\n".join(pre + [f"  result[0] = {call};" if spec.ret is not None
                            else f"  {call};"])
    kind = "__global__ void" if spec.cuda else "void"
    return f'extern "C" {kind} {spec.entry}({", ".join(decl)}) {{\n{body}\n}}\n'


def _array_arg(spec: EntrySpec, r: Role, ctype, pre: list[str]) -> str:
    p = r.param
    name = p.name
    if r.kind == "inout":
        numel = " * ".join(f"(size_t){c_expr(d)}" for d in r.shape) or "1"
        pre.append(f"  for (size_t i = 0; i < {numel}; ++i) {name}[i] = {name}_in[i];"
                   f"  // {name} is read and written")
    base, dims = spec.orig.get(name, (p.base, p.dims))
    elem = _elem(base, r, ctype)
    const = "const " if p.const else ""
    # an input the function does not declare const: the entry's const pointer, unconsted
    ptr = name if r.kind != "input" or p.const else f"const_cast<{ctype(r.dtype)}*>({name})"
    if p.dims and name not in spec.flat:
        # `float a[N][M]` takes a pointer to rows of M: the flat buffer, seen as rows
        rows = "".join(f"[{d}]" for d in dims)
        return f"reinterpret_cast<{const}{elem} (*){rows}>({ptr})"
    if elem == ctype(r.dtype):
        return ptr
    return f"({const}{elem}*)({name})"  # the file's own name for the type (a typedef)


def _elem(base: str, r: Role, ctype) -> str:
    """The element type to cast to: the file's own spelling where it names a typedef or a
    macro (it is in scope), the entry's C type where it is a plain type."""
    words = re.sub(r"\b(const|volatile|restrict|__restrict__|__restrict|register)\b", "",
                   base)
    words = " ".join(words.split())
    if not words or words in _PLAIN:
        return ctype(r.dtype)
    return words


def _size_arg(spec: EntrySpec, r: Role, pre: list[str]) -> str:
    p = r.param
    lim = SIZE_TYPES[r.ctype]
    if lim is not None:
        lo, hi = lim
        cond = [f"{p.name} < {lo}" if lo != "0" else f"{p.name} < 0"]
        if hi is not None:
            cond.append(f"{p.name} > {hi}")
        trap = "__trap()" if spec.cuda else "__builtin_trap()"
        pre.insert(0, f"  if ({' || '.join(cond)}) {trap};  // {spec.fn.name} takes "
                      f"`{p.text}`")
    return f"({r.ctype}){p.name}" if r.ctype != "int64_t" else p.name


def includes(system: list[str], cuda: bool = False) -> list[str]:
    allowed = CUDA_INCLUDES if cuda else CPU_INCLUDES
    always = ["stdint.h", "climits"] if cuda else ALWAYS
    out = []
    for h in system:
        h = h if h in allowed else CXX_HEADER.get(h, h)
        if h in allowed and h not in out and h not in always:
            out.append(h)
    return out + always


def front(entry: str, flags: list[str]) -> str:
    return f"/* kernelcrew\nentry: {entry}\nflags: [{', '.join(flags)}]\n*/\n"


def cuda_front(entry: str, flags: list[str], launch: tuple[list[str], list[str]],
               shared: str, sig, roles: list[Role], sizes: list[str]) -> str:
    def q(e: str) -> str:
        return '"' + e.replace('"', '\\"') + '"' if not re.fullmatch(r"[\w*+ ]+", e) else e

    args = [n for n, _k, _d in sig] + [r.param.name for r in roles if r.kind == "scalar"] \
        + sizes
    return ("/* kernelcrew\n"
            f"flags: [{', '.join(flags)}]\n"
            "launch:\n"
            f"  - kernel: {entry}\n"
            f"    grid: [{', '.join(q(e) for e in launch[0])}]\n"
            f"    block: [{', '.join(q(e) for e in launch[1])}]\n"
            f"    shared_bytes: {q(shared)}\n"
            f"    args: [{', '.join(args)}]\n"
            "*/\n")


def launch_exprs(exprs: list[str], flag: str, roles: list[Role]) -> list[str]:
    from kernelcrew.errors import ExprError
    from kernelcrew.kernels.expr import names_in

    sizes = {r.param.name for r in roles if r.kind == "size"}
    out = [e.strip() for item in exprs for e in split_top(item, "(") if e.strip()]
    if not 1 <= len(out) <= 3:
        raise InputError(f"{flag} {' '.join(exprs)!r}: give one to three dimensions",
                         field=flag)
    for e in out:
        try:
            unknown = names_in(e) - sizes
        except ExprError as err:
            raise InputError(f"{flag} {e!r}: {err}", field=flag) from None
        if unknown:
            raise InputError(f"{flag} {e!r}: {sorted(unknown)} are not sizes of the kernel "
                             f"({', '.join(sorted(sizes))})", field=flag)
    return out


Where = tuple[Path, int]  # (file, line) of an original line


def assemble(src: Path, fn: Function, preamble: list[str],
             code: list[tuple[SourceFile, Item, str]], entry: str, cuda: bool
             ) -> tuple[str, list[Where | None]]:
    """The baseline's body, and for each of its lines the original (file, line) or None
    (generated)."""
    lines: list[str] = []
    origin: list[Where | None] = []

    def put(text: str, first: Where | None) -> None:
        for k, ln in enumerate(text.split("\n")):
            lines.append(ln)
            origin.append(None if first is None else (first[0], first[1] + k))

    put(f"// Imported from {src.name} by `kernelcrew import` (function {fn.name}, line "
        f"{fn.line}). The code below is the original;\n// the entry at the end is "
        "generated.", None)
    put("\n".join(preamble), None)
    for sf, it, text in code:
        put(f"\n// {sf.path.name}:{it.line}", None)
        put(text, (sf.path, it.line))
    put("\n// generated: kernelcrew's calling convention (inputs, outputs, scalars, "
        f"{'long long' if cuda else 'int64_t'} sizes)", None)
    put(entry, None)
    return "\n".join(lines) + ("\n" if lines[-1] != "" else ""), origin
