"""`kernelcrew import`: one function from a C/C++ file -> an operator folder.

    baseline.cpp     the function and what it needs from its file (static helpers, macros,
                     constants, types, allow-listed includes), unchanged, plus a generated
                     `extern "C"` entry in kernelcrew's calling convention;
    op.yaml          sizes, dtypes, shapes, typical/boundary/unaligned groups, a cost model
                     estimated from the code, a tolerance to edit, and `origin:` (where the
                     code came from, whether the reference is derived, promotion warnings);
    reference.py     unless one is given: the same code promoted to float64 on its syntax
    reference64.cpp  tree (see promote.py), compiled and called through ctypes.
"""

from __future__ import annotations

import hashlib
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from kernelcrew.errors import ExprError, InputError, PolicyViolation
from kernelcrew.kernels.expr import evaluate, names_in
from kernelcrew.kernels.importer.cost import estimate_flops
from kernelcrew.kernels.importer.cuda import (
    EMULATION,
    check_emulable,
    device_text,
    emulation_entry,
    nvcc_check,
)
from kernelcrew.kernels.importer.promote import FLOAT_MATH, promote
from kernelcrew.kernels.importer.source import (
    Function,
    Param,
    SourceFile,
    closure,
    find_function,
    join_continuations,
    load_source,
    system_includes,
)
from kernelcrew.kernels.policy import CPU_INCLUDES, CUDA_INCLUDES, check_source
from kernelcrew.kernels.spec import INT_INPUTS
from kernelcrew.kernels.text import split_top

DTYPE_OF = {"float": "float32", "double": "float64", "int": "int32", "int32_t": "int32",
            "int64_t": "int64", "long long": "int64", "long": "int64", "_Float16": "float16",
            "__fp16": "float16", "uint8_t": "uint8", "unsigned char": "uint8",
            "int8_t": "int8", "signed char": "int8", "uint16_t": "uint16",
            "unsigned short": "uint16", "int16_t": "int16", "short": "int16",
            "uint32_t": "uint32", "unsigned": "uint32", "unsigned int": "uint32"}
C_TYPE = {"float32": "float", "float64": "double", "int32": "int32_t", "int64": "int64_t",
          "float16": "_Float16", "uint8": "uint8_t", "int8": "int8_t", "uint16": "uint16_t",
          "int16": "int16_t", "uint32": "uint32_t"}
ITEMSIZE = {"float32": 4, "float64": 8, "int32": 4, "int64": 8, "float16": 2, "uint8": 1,
            "int8": 1, "uint16": 2, "int16": 2, "uint32": 4}
SIZE_TYPES = {  # C type of an integer parameter -> (min, max) the entry checks, or None
    "int": ("INT_MIN", "INT_MAX"), "int32_t": ("INT32_MIN", "INT32_MAX"),
    "unsigned": ("0", "UINT_MAX"), "unsigned int": ("0", "UINT_MAX"),
    "uint32_t": ("0", "UINT32_MAX"), "size_t": ("0", None), "uint64_t": ("0", None),
    "unsigned long": ("0", None), "unsigned long long": ("0", None),
    "long": None, "long long": None, "int64_t": None, "ptrdiff_t": None, "ssize_t": None,
    "long int": None, "short": ("SHRT_MIN", "SHRT_MAX"),
}
INT_LIMITS = {"INT_MIN": -2**31, "INT_MAX": 2**31 - 1, "INT32_MIN": -2**31,
              "INT32_MAX": 2**31 - 1, "UINT_MAX": 2**32 - 1, "UINT32_MAX": 2**32 - 1,
              "SHRT_MIN": -2**15, "SHRT_MAX": 2**15 - 1, "0": 0}
FLOAT_SCALARS = {"float": "float32", "double": "float64"}
ALWAYS = ["stdint.h", "stddef.h", "climits"]


@dataclass
class Role:
    param: Param
    kind: str  # input | output | inout | scalar | size
    dtype: str = ""
    shape: list[str] = field(default_factory=list)
    value: float | None = None  # scalars


@dataclass
class ImportResult:
    folder: Path
    op_name: str
    entry: str
    warnings: list[str]
    notes: list[str]
    reference: str  # derived | given
    baseline: str = "baseline.cpp"  # or baseline.cu


def _err(sf: SourceFile, line: int, msg: str) -> InputError:
    return InputError(f"line {line}: {msg}", path=sf.path)


def parse_assignments(items: list[str], flag: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for it in items:
        if "=" not in it:
            raise InputError(f"{flag} {it!r}: write NAME=VALUE", field=flag)
        k, v = it.split("=", 1)
        k = k.strip()
        if not re.fullmatch(r"[A-Za-z_]\w*", k):
            raise InputError(f"{flag} {it!r}: {k!r} is not a name", field=flag)
        out[k] = v.strip()
    return out


def parse_case(text: str) -> dict[str, int]:
    case: dict[str, int] = {}
    for part in text.split(","):
        if not part.strip():
            continue
        if "=" not in part:
            raise InputError(f"--case {text!r}: write SIZE=VALUE,SIZE=VALUE", field="--case")
        k, v = (x.strip() for x in part.split("=", 1))
        try:
            case[k] = int(v)
        except ValueError:
            raise InputError(f"--case {text!r}: {k}={v!r} is not an integer",
                             field="--case") from None
    return case


def _names(text: str | None) -> list[str]:
    return [n.strip() for n in (text or "").split(",") if n.strip()]


def _base(p: Param) -> str:
    b = re.sub(r"\b(const|volatile|restrict|__restrict__|__restrict|struct)\b", "", p.base)
    return " ".join(b.split())


def typedef_of(sf: SourceFile, name: str, depth: int = 0) -> str:
    """What a type name the file defines with `typedef` stands for, followed through
    typedefs of typedefs (`typedef uint8_t pixel;` -> `uint8_t`); the name when it is no
    typedef of the file."""
    m = re.search(rf"\btypedef\s+((?:const\s+)?[A-Za-z_][\w\s]*?)\s+{re.escape(name)}\s*;",
                  sf.text)
    if m is None or depth > 4:
        return name
    return typedef_of(sf, " ".join(m.group(1).split()), depth + 1)


def assign_roles(sf: SourceFile, fn: Function, *, shapes: dict[str, str],
                 inputs: list[str], outputs: list[str], scalars: dict[str, str],
                 cases: list[dict[str, int]]) -> list[Role]:
    names = {p.name for p in fn.params}
    for flag, given in (("--inputs", inputs), ("--outputs", outputs), ("--shape", shapes),
                        ("--scalar", scalars)):
        bad = [n for n in given if n not in names]
        if bad:
            raise _err(sf, fn.line, f"{flag} names {', '.join(bad)}, which {fn.name} does not "
                                    f"take; its parameters are {', '.join(sorted(names))}")
    roles: list[Role] = []
    size_names = [p.name for p in fn.params if not p.pointer and _base(p) in SIZE_TYPES]
    for p in fn.params:
        base = _base(p)
        if p.pointer > 1:
            raise _err(sf, p.line, f"parameter {p.text!r}: pointers to pointers are not "
                                   "supported; import a function that takes flat arrays")
        vla = [d for d in p.dims if not d or set(re.findall(r"[A-Za-z_]\w*", d)) & names]
        if vla:
            raise _err(sf, p.line, f"parameter {p.text!r}: a C99 variable-length array "
                                   "parameter is not C++; declare its rows with constant sizes "
                                   "(`float a[][M]` with M a macro) or pass a flat pointer")
        if p.pointer:
            dtype = DTYPE_OF.get(base) or DTYPE_OF.get(typedef_of(sf, base))
            if dtype is None:
                raise _err(sf, p.line, f"parameter {p.text!r}: arrays of {base!r} are not "
                                       "supported (float, double, _Float16 and the 8- to "
                                       "64-bit integers of stdint.h only)")
            if p.name in inputs and p.name in outputs:
                kind = "inout"
            elif p.name in outputs:
                if p.const:
                    raise _err(sf, p.line, f"parameter {p.text!r} is const: it cannot be an "
                                           "output; remove it from --outputs")
                kind = "output"
            elif p.name in inputs or p.const:
                kind = "input"
            elif outputs and not _written(fn, sf, p.name):
                # the outputs are named and the code never stores through this one nor
                # hands it to a call: an input (old C rarely says const; the harness
                # checks after every run that inputs are unchanged, so a wrong guess is
                # caught as a kernel writing its inputs)
                kind = "input"
            else:
                raise _role_error(sf, fn, p, inputs, outputs)
            if p.name not in shapes:
                raise _err(sf, p.line, f"parameter {p.name!r} needs a shape: add --shape "
                                       f"{p.name}=EXPR in the sizes ({', '.join(size_names)}), "
                                       f"e.g. --shape {p.name}={'*'.join(size_names[:2]) or 'n'}")
            dims = [d.strip() for d in shapes[p.name].split(",") if d.strip()]
            for d in dims:
                try:
                    unknown = names_in(d) - set(size_names)
                except ExprError as e:
                    raise InputError(f"--shape {p.name}={shapes[p.name]}: {e}",
                                     field="--shape") from None
                if unknown:
                    raise InputError(f"--shape {p.name}={shapes[p.name]}: {sorted(unknown)} "
                                     f"are not integer parameters of {fn.name} "
                                     f"({', '.join(size_names)})", field="--shape")
            roles.append(Role(p, kind, dtype, dims))
        elif base in SIZE_TYPES:
            missing = [i for i, c in enumerate(cases) if p.name not in c]
            if missing:
                raise _err(sf, p.line, f"size {p.name!r} has no value in --case "
                                       f"{missing[0] + 1}; add {p.name}=VALUE to every --case")
            roles.append(Role(p, "size", "int64"))
        elif base in FLOAT_SCALARS:
            if p.name not in scalars:
                raise _err(sf, p.line, f"parameter {p.text!r} is a scalar: give its value with "
                                       f"--scalar {p.name}=VALUE")
            try:
                value = float(scalars[p.name])
            except ValueError:
                raise InputError(f"--scalar {p.name}={scalars[p.name]!r} is not a number",
                                 field="--scalar") from None
            roles.append(Role(p, "scalar", FLOAT_SCALARS[base], value=value))
        else:
            raise _err(sf, p.line, f"parameter {p.text!r}: type {base!r} is not supported "
                                   "(float/double/int arrays, integer sizes, float scalars)")
    sizes = {r.param.name for r in roles if r.kind == "size"}
    for i, c in enumerate(cases):
        extra = set(c) - sizes
        if extra:
            raise InputError(f"--case {i + 1} gives {sorted(extra)}, which are not integer "
                             f"parameters of {fn.name} ({', '.join(sorted(sizes))})",
                             field="--case")
    if not any(r.kind in ("output", "inout") for r in roles) and fn_returns(sf, fn) is None:
        raise _err(sf, fn.line, f"{fn.name} has no output: name the arrays it writes with "
                                "--outputs")
    return roles


def _role_error(sf: SourceFile, fn: Function, p: Param, inputs: list[str],
                outputs: list[str]) -> InputError:
    """One line for every pointer whose role is not given, with the flags that fix it."""
    unknown = [q for q in fn.params if q.pointer and not q.const and q.name not in inputs
               and q.name not in outputs]
    outs = [q.name for q in unknown if _written(fn, sf, q.name)]
    ins = [q.name for q in unknown if q.name not in outs]
    fix = " ".join(x for x in (f"--outputs {','.join(outs)}" if outs else "",
                               f"--inputs {','.join(ins)}" if ins else "") if x)
    what = []
    if outs:
        what.append(f"written here: {', '.join(outs)}")
    if ins:
        what.append(f"only read: {', '.join(ins)}")
    return _err(sf, p.line, f"the role of {', '.join(q.name for q in unknown)} cannot be "
                            f"inferred (pointers not declared const; {'; '.join(what)}): add "
                            f"{fix} (an array in both lists is read and written)")


def _written(fn: Function, sf: SourceFile, name: str) -> bool:
    body = sf.data[fn.body_start:fn.end].decode()
    n = re.escape(name)
    return bool(re.search(rf"\b{n}\s*\[[^\]]*\]\s*(?:[-+*/|&^]?=(?!=)|\+\+|--)", body) or
                re.search(rf"\*\s*\(?\s*{n}\b[^;=]*\)?\s*=(?!=)", body) or
                re.search(rf"\b(?!const\b)\w+\s*\*\s*\w+\s*=\s*{n}\b", body) or
                # the pointer itself passed to a call (not an element: `pow(x[i], 2)`)
                re.search(rf"\w\s*\([^;]*\b{n}\b(?!\s*\[)", body))


def fn_returns(sf: SourceFile, fn: Function) -> str | None:
    head = sf.data[fn.start:fn.body_start].decode()
    head = head[:head.find(fn.name)] if fn.name in head else head
    head = re.sub(r"\b(static|inline|extern|__inline__|__attribute__\s*\(\(.*?\)\)|"
                  r"\"C\"|constexpr|__global__|__device__|__host__|__forceinline__|"
                  r"__noinline__)\b|__launch_bounds__\s*\((?:[^()]|\([^()]*\))*\)", " ", head)
    words = " ".join(head.split())
    if words in ("", "void"):
        return None
    return words if words in DTYPE_OF else "unsupported:" + words


# ---------------------------------------------------------------- code generation

def _entry(fn: Function, roles: list[Role], entry: str, ret: str | None, *, float64: bool,
           cuda: bool = False, launch: tuple[list[str], list[str]] | None = None) -> str:
    """The generated entry: CPU (`cuda=False`), CUDA `__global__` (`cuda=True`), or with
    `launch` the CPU emulation of a CUDA launch (float64 reference)."""
    def ctype(dtype: str) -> str:
        return "double" if float64 and dtype in ("float32", "float16") else C_TYPE[dtype]

    decl: list[str] = []
    for name, kind, dtype in _signature_order(roles, ret):
        decl.append(f"const {ctype(dtype)}* {name}" if kind == "input"
                    else f"{ctype(dtype)}* {name}")
    args: dict[str, str] = {}
    pre: list[str] = []
    for r in roles:
        p = r.param
        if r.kind == "input":
            args[p.name] = p.name if p.const else f"const_cast<{ctype(r.dtype)}*>({p.name})"
        elif r.kind == "output":
            args[p.name] = p.name
        elif r.kind == "inout":
            numel = "*".join(f"(size_t)({_c_expr(d)})" for d in r.shape) or "1"
            pre.append(f"  for (size_t i = 0; i < {numel}; ++i) {p.name}[i] = {p.name}_in[i];"
                       f"  // {p.name} is read and written")
            args[p.name] = p.name
        if p.dims and r.kind in ("input", "output", "inout"):
            # `float a[N][M]` takes a pointer to rows of M: the flat buffer, seen as rows
            rows = "".join(f"[{d}]" for d in p.dims)
            const = "const " if p.const else ""
            args[p.name] = f"reinterpret_cast<{const}{ctype(r.dtype)} (*){rows}>({args[p.name]})"
    for r in roles:
        if r.kind == "scalar":
            decl.append(f"{'double' if float64 else C_TYPE[r.dtype]} {r.param.name}")
            args[r.param.name] = r.param.name
    for r in roles:
        if r.kind != "size":
            continue
        p = r.param
        decl.append(f"{'long long' if cuda else 'int64_t'} {p.name}")
        base = _base(p)
        lim = SIZE_TYPES[base]
        if lim is not None:
            lo, hi = lim
            cond = [f"{p.name} < {lo}" if lo != "0" else f"{p.name} < 0"]
            if hi is not None:
                cond.append(f"{p.name} > {hi}")
            trap = "__trap()" if cuda else "__builtin_trap()"
            pre.insert(0, f"  if ({' || '.join(cond)}) {trap};  // {fn.name} takes `{p.text}`")
        args[p.name] = f"({base}){p.name}" if base != "int64_t" else p.name
    call = f"{fn.name}({', '.join(args[p.name] for p in fn.params)})"
    if launch is not None:
        return emulation_entry(entry, decl, call, pre, *launch)
    body = "\n".join(pre + [f"  result[0] = {call};" if ret is not None else f"  {call};"])
    kind = "__global__ void" if cuda else "void"
    return f'extern "C" {kind} {entry}({", ".join(decl)}) {{\n{body}\n}}\n'


def _c_expr(e: str) -> str:
    if re.search(r"\b(min|max|ceil_div)\b", e):
        raise InputError(f"shape {e!r} of an array that is read and written must use only "
                         "+ - * // % and parentheses", field="--shape")
    return e.replace("//", "/")


def _signature_order(roles: list[Role], ret: str | None) -> list[tuple[str, str, str]]:
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


# ---------------------------------------------------------------- groups and cost

def boundary_cases(case: dict[str, int]) -> list[dict[str, int]]:
    """Small cases with the same order relations between sizes as `case` (ranks), and odd
    ones: a kernel that assumes `V <= Vp` still gets sizes that honour it."""
    vals = sorted(set(case.values()))
    rank = {v: i + 1 for i, v in enumerate(vals)}
    a = {k: rank[v] for k, v in case.items()}
    b = {k: 2 * rank[v] + 1 for k, v in case.items()}
    out = [a]
    if b != a:
        out.append(b)
    return out


def unaligned_cases(cases: list[dict[str, int]]) -> list[dict[str, int]]:
    small = min(cases, key=lambda c: sum(c.values()))
    odd = {k: v - 1 if v > 2 and v % 2 == 0 else v for k, v in small.items()}
    return [odd]


def _dedupe(cases: list[dict[str, int]], seen: list[dict[str, int]]) -> list[dict[str, int]]:
    out = []
    for c in cases:
        if c not in seen and c not in out:
            out.append(c)
    return out


# ---------------------------------------------------------------- the import

@dataclass
class ImportRequest:
    source: Path
    function: str
    shapes: dict[str, str]
    cases: list[dict[str, int]]
    inputs: list[str] = field(default_factory=list)
    outputs: list[str] = field(default_factory=list)
    scalars: dict[str, str] = field(default_factory=dict)
    defines: dict[str, str] = field(default_factory=dict)
    flags: list[str] | None = None
    out: Path | None = None
    name: str | None = None
    reference: Path | None = None  # a reference.py the user wrote
    values: dict[str, str] = field(default_factory=dict)  # integer input -> "LO:HI"
    family: str = "imported"
    force: bool = False
    grid: list[str] = field(default_factory=list)  # CUDA launch: expressions in the sizes
    block: list[str] = field(default_factory=list)
    shared_bytes: str | None = None
    # the nvcc that compile-checks a CUDA import (the caller finds it: tools' nvcc_path);
    # None: no compile check
    nvcc: str | None = None


def import_function(req: ImportRequest) -> ImportResult:
    src = Path(req.source).resolve()
    sf = load_source(src)
    fn = find_function(sf, req.function)
    cuda = fn.is_global
    if cuda and not req.block:
        raise _err(sf, fn.line, f"{fn.name} is a CUDA __global__ function: give its launch, "
                                "e.g. --grid 'ceil_div(n, 256)' --block 256")
    if not cuda and (req.grid or req.block):
        raise _err(sf, fn.line, f"{fn.name} is not a __global__ function: --grid/--block are "
                                "for CUDA kernels")
    if not req.cases:
        raise InputError("give at least one typical case: --case SIZE=VALUE,SIZE=VALUE",
                         field="--case")
    roles = assign_roles(sf, fn, shapes=req.shapes, inputs=req.inputs, outputs=req.outputs,
                         scalars=req.scalars, cases=req.cases)
    ret = fn_returns(sf, fn)
    if ret is not None and ret.startswith("unsupported:"):
        raise _err(sf, fn.line, f"{fn.name} returns {ret.split(':', 1)[1]!r}; only void or a "
                                "float/double/int result can be imported")
    items = closure(sf, fn, skip=set(req.defines))  # UnresolvedMacro: one line, exit 2
    launch: tuple[list[str], list[str]] = ([], [])
    if cuda:
        if any(r.kind == "inout" for r in roles):
            raise _err(sf, fn.line, "a CUDA kernel's array that is read and written is not "
                                    "supported by the import; give it as an output only if it "
                                    "is not read")
        launch = (_launch_exprs(req.grid or ["1"], "--grid", roles),
                  _launch_exprs(req.block, "--block", roles))
        _launch_exprs([req.shared_bytes or "0"], "--shared-bytes", roles)
    op_name = req.name or re.sub(r"[^a-z0-9_]", "_", fn.name.lower())
    if not re.fullmatch(r"[a-z0-9_]+", op_name):
        raise InputError(f"--name {op_name!r}: use lowercase letters, digits and _",
                         field="--name")
    entry = f"{fn.name}_entry"
    folder = Path(req.out) if req.out else Path.cwd() / op_name
    if folder.exists() and any(folder.iterdir()) and not req.force:
        raise InputError("the output folder exists and is not empty; choose another --out or "
                         "pass --force", path=folder)
    sizes = [r.param.name for r in roles if r.kind == "size"]
    sig = _signature_order(roles, ret)
    shapes = {r.param.name: r.shape for r in roles if r.kind in ("input", "output", "inout")}
    # an array read and written is split into NAME_in (input) and NAME (output), one shape
    shapes.update({f"{r.param.name}_in": r.shape for r in roles if r.kind == "inout"})
    if ret is not None:
        shapes["result"] = ["1"]
    notes: list[str] = []
    warnings: list[str] = []
    for r in roles:
        if r.param.name in req.values:
            continue
        if r.kind in ("input", "inout") and r.dtype in INT_INPUTS:
            lo, hi = INT_INPUTS[r.dtype]
            notes.append(f"{r.param.name} is a {r.dtype} array: default inputs cover "
                         f"{lo} to {hi - 1}; if it holds indices or a narrower range, give "
                         f"--values {r.param.name}=LO:HI")
        elif r.kind in ("input", "inout") and r.dtype[0] in "iu":
            notes.append(f"{r.param.name} is an integer array: default inputs are small "
                         "integers from -8 to 8; if it holds indices, give --values "
                         f"{r.param.name}=LO:HI (token ids: --values {r.param.name}=0:VOCAB)")

    # sizes the entry narrows must fit; int-indexed code must not overflow on the cases
    for i, c in enumerate(req.cases):
        for r in roles:
            if r.kind != "size":
                continue
            lim = SIZE_TYPES[_base(r.param)]
            if lim and (c[r.param.name] < INT_LIMITS[lim[0]] or
                        (lim[1] and c[r.param.name] > INT_LIMITS[lim[1]])):
                raise InputError(f"--case {i + 1}: {r.param.name}={c[r.param.name]} does not "
                                 f"fit the function's `{r.param.text}`", field="--case")
        if any(_base(r.param) in ("int", "int32_t") for r in roles if r.kind == "size"):
            for name, dims in shapes.items():
                n = 1
                for d in dims:
                    n *= evaluate(d, c)
                if n > 2**31 - 1:
                    warnings.append(f"--case {i + 1}: {name} has {n} elements, more than an "
                                    "int can index; the original code may overflow there")

    data = sf.data
    texts = [(it, join_continuations(device_text(fn, sf) if cuda and it is fn.item
                                     else it.text(data)).rstrip()) for it in items]
    for it, _t in texts:
        if cuda and it is not fn.item and it.node_type == "function_definition" and \
                "__global__" in it.text(data).split("{", 1)[0]:
            raise _err(sf, it.line, f"{fn.name} needs another __global__ function "
                                    f"({'/'.join(it.defines)}); import kernels that launch "
                                    "nothing")
    includes = _includes(sf, cuda=cuda)
    is_c = src.suffix.lower() == ".c"
    uses_restrict = any(re.search(r"\brestrict\b", t) for _, t in texts)
    uses_omp = any(re.search(r"#\s*pragma\s+omp\b|\bomp_\w+\s*\(", t) for _, t in texts)
    calls_omp = any(re.search(r"\bomp_\w+\s*\(", t) for _, t in texts)
    preamble = [f"#include <{h}>" for h in includes]
    if uses_restrict:
        preamble.append("#define restrict __restrict__  // C99 `restrict` in C++")
    preamble += [f"#define {k} {v}  // --define" for k, v in req.defines.items()]
    flags = list(req.flags) if req.flags else (["-O3"] if cuda else ["-O2"])
    if uses_omp and not cuda and "-fopenmp" not in flags:
        flags.append("-fopenmp")
    if is_c and "-fpermissive" in flags:
        flags.remove("-fpermissive")

    def assemble(code: list[tuple], entry_text: str) -> tuple[str, list[int | None]]:
        lines: list[str] = []
        origin: list[int | None] = []

        def put(text: str, first: int | None) -> None:
            for k, ln in enumerate(text.split("\n")):
                lines.append(ln)
                origin.append(None if first is None else first + k)

        put(f"// Imported from {src.name} by `kernelcrew import` (function {fn.name}, line "
            f"{fn.line}). The code below is the original;\n// the entry at the end is "
            "generated.", None)
        put("\n".join(preamble), None)
        for it, text in code:
            put(f"\n// {src.name}:{it.line}", None)
            put(text, it.line)
        put("\n// generated: kernelcrew's calling convention (inputs, outputs, scalars, "
            f"{'long long' if cuda else 'int64_t'} sizes)", None)
        put(entry_text, None)
        return "\n".join(lines) + ("\n" if lines[-1] != "" else ""), origin

    body, line_map = assemble(texts, _entry(fn, roles, entry, ret, float64=False, cuda=cuda))
    if cuda:
        front = _cuda_front(entry, flags, launch, req.shared_bytes or "0", sig, roles, sizes)
    else:
        front = _front(entry, flags)
    baseline = front + body
    _check_policy(sf, body, line_map, front.count("\n"), "cuda" if cuda else "cpu")
    if cuda:
        nvcc_check(sf, baseline, line_map, front.count("\n"), req.nvcc)
    else:
        _syntax_check(sf, baseline, line_map, front.count("\n"))

    # cost model
    helpers = {n: t for it, t in texts if it.node_type == "function_definition"
               for n in it.defines}
    fn_text = join_continuations(fn.item.text(data))
    flops = estimate_flops(fn_text, helpers, set(sizes), where=src.name, first_line=fn.line)
    notes += flops.notes
    if cuda and "1" in flops.terms:  # straight-line work runs once per thread
        outs = [shapes[n] for n, k, _ in sig if k == "output"]
        per = "*".join(outs[0]) if outs else "1"
        flops.terms[per] = flops.terms.get(per, 0) + flops.terms.pop("1")
        notes.append(f"cost: the kernel's straight-line flops counted once per element of "
                     f"the first output ({per})")
    byte_terms: dict[str, int] = {}
    for name, kind, dtype in sig:
        key = "*".join(f"({d})" if re.search(r"[+\-]", d) else d for d in shapes[name]) or "1"
        byte_terms[key] = byte_terms.get(key, 0) + ITEMSIZE[dtype]
    cost_bytes = " + ".join(f"{v}*{k}" for k, v in byte_terms.items())

    # the float64 reference
    reference_kind = "given" if req.reference else "derived"
    promoted_texts = []
    if not req.reference:
        if cuda:
            check_emulable(sf, texts)
        for it, text in texts:
            pr = promote(text, first_line=it.line, where=src.name)
            warnings += [w for w in pr.warnings if w not in warnings]
            promoted_texts.append((it, pr.text))
        ref_pre = _entry(fn, roles, entry, ret, float64=True, launch=launch if cuda else None)
        if cuda:
            ref_body = EMULATION + "\n".join(
                [f"#define {k} {v}" for k, v in req.defines.items()]
                + [f"\n// {src.name}:{it.line}\n{t}" for it, t in promoted_texts]
                + ["", ref_pre])
        else:
            ref_body, _ = assemble(promoted_texts, ref_pre)
            ref_body = ref_body.replace("#include <climits>", "#include <climits>\n#include "
                                        "<cfloat>", 1)

    reductions = bool(re.search(r"\+=|\bsum\b|\bacc", fn_text)) or bool(flops.terms) and any(
        k.count("*") >= 2 for k in flops.terms)
    tol = ("1.0e-4", "1.0e-4") if reductions else ("1.0e-4", "1.0e-5")
    outs = [r.dtype for r in roles if r.kind in ("output", "inout")] + \
        ([DTYPE_OF[ret]] if ret is not None else [])
    if outs and all(d[0] in "iu" for d in outs):
        tol = ("0.0", "0.0")  # integer results: exact

    # groups
    typical = req.cases
    boundary = _dedupe([c for t in typical[:1] for c in boundary_cases(t)], typical)
    unaligned = _dedupe(unaligned_cases(typical), typical + boundary)

    ranges = _value_ranges(req.values, roles, sizes)
    folder.mkdir(parents=True, exist_ok=True)
    base_name = "baseline.cu" if cuda else "baseline.cpp"
    (folder / base_name).write_text(baseline)
    if ranges:
        (folder / "inputs.py").write_text(_inputs_py(fn.name, ranges))
    if req.reference:
        shutil.copyfile(req.reference, folder / "reference.py")
    else:
        (folder / "reference64.cpp").write_text(
            "// kernelcrew import: the float64 build of the baseline (float promoted to double "
            "on the syntax tree).\n" + ref_body)
        (folder / "reference.py").write_text(_reference_py(src, fn, entry, sig, shapes, roles,
                                                           sizes, calls_omp))
    (folder / "op.yaml").write_text(_op_yaml(
        op_name=op_name, fn=fn, src=src, sig=sig, shapes=shapes, roles=roles, sizes=sizes,
        cost_bytes=cost_bytes, flops=flops.expr(), tol=tol, typical=typical,
        boundary=boundary, unaligned=unaligned, reference=reference_kind, warnings=warnings,
        notes=notes, family=req.family, digest=hashlib.sha256(data).hexdigest(), entry=entry,
        flags=flags, backend="cuda" if cuda else "cpu", base_name=base_name))
    return ImportResult(folder, op_name, entry, warnings, notes, reference_kind, base_name)


CXX_HEADER = {"float.h": "cfloat", "limits.h": "climits", "string.h": "cstring",
              "stdlib.h": "cstdlib"}


def _includes(sf: SourceFile, cuda: bool = False) -> list[str]:
    allowed = CUDA_INCLUDES if cuda else CPU_INCLUDES
    always = ["stdint.h", "climits"] if cuda else ALWAYS
    out = []
    for h, _line in system_includes(sf):
        h = h if h in allowed else CXX_HEADER.get(h, h)
        if h in allowed and h not in out and h not in always:
            out.append(h)
    return out + always


def _launch_exprs(exprs: list[str], flag: str, roles: list[Role]) -> list[str]:
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


def _cuda_front(entry: str, flags: list[str], launch: tuple[list[str], list[str]],
                shared: str, sig, roles: list[Role], sizes: list[str]) -> str:
    def q(e: str) -> str:
        return _yaml_str(e) if not re.fullmatch(r"[\w*+ ]+", e) else e

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


def _front(entry: str, flags: list[str]) -> str:
    return f"/* kernelcrew\nentry: {entry}\nflags: [{', '.join(flags)}]\n*/\n"


def _orig_line(line_map: list[int | None], body_line: int) -> int | None:
    for k in range(body_line - 1, -1, -1):
        if 0 <= k < len(line_map) and line_map[k] is not None:
            return line_map[k] if k == body_line - 1 else None
    return None


def _check_policy(sf: SourceFile, body: str, line_map: list[int | None], offset: int,
                  backend: str = "cpu") -> None:
    try:
        check_source(body, backend)
    except PolicyViolation as e:
        msg = str(e)
        m = re.match(r"line (\d+): (.*)", msg)
        if m:
            orig = _orig_line(line_map, int(m.group(1)))
            where = f"line {orig}" if orig else "the generated code"
            raise InputError(f"{where}: {m.group(2)}; kernel files may not do this, so the "
                             "function cannot be imported as it is", path=sf.path) from None
        raise InputError(msg, path=sf.path) from None


def _syntax_check(sf: SourceFile, text: str, line_map: list[int | None], offset: int) -> None:
    cxx = shutil.which("g++") or shutil.which("c++")
    if cxx is None:
        return  # the harness says so when it compiles
    with tempfile.TemporaryDirectory(prefix="kc-import-") as d:
        p = Path(d) / "baseline.cpp"
        p.write_text(text)
        r = subprocess.run([cxx, "-std=c++17", "-fsyntax-only", "-fopenmp", "-w", str(p)],
                           capture_output=True, text=True, timeout=120, check=False)
    if r.returncode == 0:
        return
    for ln in r.stderr.splitlines():
        m = re.match(r".*?baseline\.cpp:(\d+):\d+: (?:fatal )?error: (.*)", ln)
        if not m:
            continue
        orig = _orig_line(line_map, int(m.group(1)) - offset)
        what = m.group(2)
        name = re.search(r"[‘'`]([A-Za-z_]\w*)[’'`] (?:was not declared|has not been declared|"
                         r"does not name a type|is not a member)", what)
        if name and (name.group(1) in FLOAT_MATH or name.group(1) in FLOAT_MATH.values()):
            fix = f"{name.group(1)} is declared in <math.h>: include it in the file"
        elif name:
            fix = (f"{name.group(1)} comes from outside this file (a project header or the "
                   f"build): define it in the file, or for a macro pass --define "
                   f"{name.group(1)}=VALUE")
        else:
            fix = "the extracted code must compile on its own as C++"
        where = f"line {orig}" if orig else "the generated entry"
        raise InputError(f"{where}: g++: {what}; {fix}", path=sf.path)
    raise InputError(f"the extracted code does not compile: {r.stderr.strip()[:200]}",
                     path=sf.path)


def _yaml_str(s: str) -> str:
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _flow(d: dict) -> str:
    return "{" + ", ".join(f"{k}: {v}" for k, v in d.items()) + "}"


def _op_yaml(*, op_name, fn, src, sig, shapes, roles, sizes, cost_bytes, flops, tol, typical,
             boundary, unaligned, reference, warnings, notes, family, digest, entry,
             flags, backend="cpu", base_name="baseline.cpp") -> str:
    def shape(name: str) -> str:
        return "[" + ", ".join(_yaml_str(d) if "," in d else d for d in shapes[name]) + "]"

    lines = [
        (f"# Imported from {src.name} by `kernelcrew import` (function {fn.name}, line "
        f"{fn.line})."),
        ("# Generated fields are a starting point: check the shapes, the groups and the "
        "tolerance."),
        f"name: {op_name}",
        f"description: {_yaml_str(f'{fn.name} from {src.name}')}",
        (f"family: {family}                  # tag for experience retrieval; edit to "
        "elementwise, reduction, matmul, ..."),
        f"sizes: [{', '.join(sizes)}]",
        "inputs:",
    ]
    for name, kind, dtype in sig:
        if kind == "input":
            lines.append(f"  {name}: {{dtype: {dtype}, shape: {shape(name)}}}")
    lines.append("outputs:")
    for name, kind, dtype in sig:
        if kind == "output":
            lines.append(f"  {name}: {{dtype: {dtype}, shape: {shape(name)}}}")
    scal = [r for r in roles if r.kind == "scalar"]
    if scal:
        lines.append("scalars:")
        lines += [f"  {r.param.name}: {{dtype: {r.dtype}, value: {r.value!r}}}" for r in scal]
    lines += [
        ("# estimated from the code: bytes = every array read or written once, flops = "
        "float operations in the loops"),
        f"cost: {{bytes: {_yaml_str(cost_bytes)}, flops: {_yaml_str(flops)}}}",
        ("# integer results, compared exactly" if tol == ("0.0", "0.0") else
         "# float32 against a float64 reference; edit to what your application accepts"),
        f"tolerance: {{rtol: {tol[0]}, atol: {tol[1]}}}",
        "shapes:",
        f"  typical:   {{weight: 1.0,  cases: [{', '.join(_flow(c) for c in typical)}]}}",
    ]
    if boundary:
        lines.append("  # generated: small sizes in the same order as the first typical case")
        lines.append(f"  boundary:  {{weight: 0.25, cases: [{', '.join(_flow(c) for c in boundary)}]}}")
    if unaligned:
        lines.append("  # generated: the smallest typical case with even sizes made odd")
        lines.append(f"  unaligned: {{weight: 0.5,  cases: [{', '.join(_flow(c) for c in unaligned)}]}}")
    lines += [
        f"baselines: {{{backend}: {base_name}}}",
        ("origin:                           # where the baseline came from "
        "(`kernelcrew export RUN --patch` reads it)"),
        f"  source: {_yaml_str(str(src))}",
        f"  function: {fn.name}",
        f"  line: {fn.line}",
        f"  sha256: {digest}",
        f"  entry: {entry}",
        f"  flags: [{', '.join(flags)}]",
        f"  reference: {reference}" + ("            # reference.py calls reference64.cpp: "
                                       "the same code promoted to float64"
                                       if reference == "derived" else ""),
    ]
    if warnings:
        lines.append("  warnings:                       # where float64 promotion changes "
                     "semantics, not only precision")
        lines += [f"    - {_yaml_str(w)}" for w in warnings]
    else:
        lines.append("  warnings: []")
    if notes:
        lines.append("  notes:")
        lines += [f"    - {_yaml_str(n)}" for n in notes]
    return "\n".join(lines) + "\n"


def _value_ranges(values: dict[str, str], roles: list[Role], sizes: set[str] | list[str]
                  ) -> dict[str, tuple[str, list[str], str, str]]:
    """`--values NAME=LO:HI` -> {op.yaml name: (dtype, shape, LO, HI)}, checked: an integer
    input of the function, bounds that are expressions in the sizes."""
    out = {}
    by_name = {r.param.name: r for r in roles}
    for name, spec in values.items():
        r = by_name.get(name)
        if r is None or r.kind not in ("input", "inout") or r.dtype[0] not in "iu":
            ins = [x.param.name for x in roles if x.kind in ("input", "inout")
                   and x.dtype[0] in "iu"]
            raise InputError(f"--values {name}={spec}: {name} is not an integer input of the "
                             f"function (its integer inputs: {', '.join(ins) or 'none'})",
                             field="--values")
        lo, sep, hi = spec.partition(":")
        if not sep or not lo.strip() or not hi.strip():
            raise InputError(f"--values {name}={spec}: write LO:HI, the integers drawn from "
                             "LO up to HI - 1 (expressions in the sizes), e.g. 0:V",
                             field="--values")
        for bound in (lo, hi):
            try:
                unknown = names_in(bound) - set(sizes)
            except ExprError as e:
                raise InputError(f"--values {name}={spec}: {e}", field="--values") from None
            if unknown:
                raise InputError(f"--values {name}={spec}: {sorted(unknown)} are not sizes of "
                                 f"the function ({', '.join(sorted(sizes))}); use numbers or "
                                 "sizes", field="--values")
        key = f"{name}_in" if r.kind == "inout" else name
        out[key] = (r.dtype, r.shape, lo.strip(), hi.strip())
    return out


def _inputs_py(function: str, ranges: dict[str, tuple[str, list[str], str, str]]) -> str:
    rows = "\n".join(f"    {n!r}: ({d!r}, {s!r}, {lo!r}, {hi!r}),"
                     for n, (d, s, lo, hi) in ranges.items())
    return (f'''"""Inputs of {function}, from `kernelcrew import --values`: the arrays named here
hold integers drawn from [LO, HI) (expressions in the sizes); the others get the defaults."""

import numpy as np

from kernelcrew.kernels.expr import evaluate

# array -> (dtype, shape, LO, HI)
RANGES = {{
{rows}
}}


def make_inputs(rng, **sizes):
    out = {{}}
    for name, (dtype, shape, lo, hi) in RANGES.items():
        dims = tuple(evaluate(d, sizes) for d in shape)
        out[name] = rng.integers(evaluate(lo, sizes), evaluate(hi, sizes), size=dims).astype(dtype)
    return out
''')


def _reference_py(src: Path, fn: Function, entry: str, sig, shapes, roles, sizes,
                  uses_omp: bool) -> str:
    args = []
    for r in roles:
        if r.kind == "inout":
            args.append((f"{r.param.name}_in", "input"))
    order = ([(n, "input") for n, k, _ in sig if k == "input"]
             + [(n, "output") for n, k, _ in sig if k == "output"]
             + [(r.param.name, "scalar") for r in roles if r.kind == "scalar"]
             + [(s, "size") for s in sizes])
    dtypes = {n: d for n, _, d in sig}
    spec = [(n, k, dtypes.get(n, "float64"), shapes.get(n, [])) for n, k in order]
    return f'''"""Float64 reference for {fn.name} ({src.name}, line {fn.line}), derived by `kernelcrew import`.

reference64.cpp is the baseline's code with float promoted to double on its syntax tree;
it is compiled once (cached) and called through ctypes. Replace this file with your own
NumPy reference at any time (and set `origin.reference: given` in op.yaml).
"""

from pathlib import Path

from kernelcrew.kernels.derived import DerivedReference

_REF = DerivedReference(
    Path(__file__).with_name("reference64.cpp"),
    entry={entry!r},
    args={spec!r},
    openmp={uses_omp!r},
)


def reference(**kw):
    return _REF(**kw)
'''
