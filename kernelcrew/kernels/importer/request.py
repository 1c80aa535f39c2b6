"""What an import is asked (`ImportRequest`, the command line's values parsed), and the
function it reads (`Context`): as written in the file, and as the compiler sees it with
the build's macros expanded."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from kernelcrew.errors import InputError
from kernelcrew.kernels.importer.preprocess import BuildFlags, from_compile_commands, parse_define
from kernelcrew.kernels.importer.roles import (
    DTYPE_OF,
    SIZE_TYPES,
    array_typedefs,
    base_type,
    err,
    resolve_type,
    typedef_table,
    with_array_typedefs,
)
from kernelcrew.kernels.importer.source import Function, Item, SourceFile, find_function
from kernelcrew.kernels.importer.unit import Unit, expanded_function, load_unit

Code = list[tuple[SourceFile, Item, str]]  # (file, item, its text) in compile order


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


def parse_defines(items: list[str]) -> dict[str, str]:
    """`--define NAME=VALUE` or `--define NAME` (as -DNAME: 1)."""
    return dict(parse_define(it) for it in items)


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
    include_dirs: list[Path] = field(default_factory=list)
    compile_commands: Path | None = None  # the build's compile_commands.json
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
    undefines: list[str] = field(default_factory=list)  # -U: the float64 reference's build

    def build(self) -> BuildFlags:
        """The build's flags: compile_commands.json's entry, then the flags given here."""
        b = from_compile_commands(self.compile_commands, self.source) \
            if self.compile_commands else BuildFlags()
        b.include_dirs += [Path(d).resolve() for d in self.include_dirs]
        for d in b.include_dirs:
            if not d.is_dir():
                raise InputError("not a folder; give the folder the headers are in",
                                 path=d, field="--include-dir")
        b.defines.update(self.defines)
        b.undefines += [n for n in self.undefines if n not in b.undefines]
        return b


@dataclass
class Context:
    """The function as written (`fn` in `unit.main`) and as compiled (`xfn` in `xsf`)."""

    req: ImportRequest
    src: Path
    unit: Unit
    fn: Function
    xsf: SourceFile
    xfn: Function
    typedefs: dict[str, str]
    cuda: bool
    notes: list[str] = field(default_factory=list)
    flat: set[str] = field(default_factory=set)  # C99 VLA parameters lowered (vla.py)
    xlines: list[int] = field(default_factory=list)  # the file's line of each xsf line
    warnings: list[str] = field(default_factory=list)

    @property
    def sf(self) -> SourceFile:
        return self.unit.main


def read_request(req: ImportRequest) -> Context:
    src = Path(req.source).resolve()
    req.source = src
    unit = load_unit(src, req.build())
    fn = find_function(unit.main, req.function, None if unit.pp is None else
                       lambda line: unit.pp.is_active(unit.main.path, line))
    xsf, xfn, xlines = expanded_function(unit, fn)
    if len(xfn.params) != len(fn.params) and unit.pp is not None:
        fn = Function(fn.name, fn.line, fn.start, fn.end, fn.body_start, xfn.params,
                      fn.is_global, fn.item, fn.node)  # a macro that declares several
    for p0, p in zip(fn.params, xfn.params, strict=False):
        p.line = p0.line  # messages name the line in the file, not in the expansion
    text = unit.pp.text() if unit.pp else unit.main.text
    typedefs = typedef_table(text)
    arrays = array_typedefs(text)
    with_array_typedefs(fn.params, arrays)
    with_array_typedefs(xfn.params, arrays)
    ctx = Context(req, src, unit, fn, xsf, xfn, typedefs, fn.is_global, notes=unit.notes,
                  xlines=xlines)
    if ctx.cuda and not req.block:
        raise err(ctx.sf, fn.line, f"{fn.name} is a CUDA __global__ function: give its "
                                   "launch, e.g. --grid 'ceil_div(n, 256)' --block 256")
    if not ctx.cuda and (req.grid or req.block):
        raise err(ctx.sf, fn.line, f"{fn.name} is not a __global__ function: --grid/--block "
                                   "are for CUDA kernels")
    if not req.cases:
        sizes = [p.name for p in xfn.params if not p.pointer
                 and resolve_type(base_type(p), typedefs) in SIZE_TYPES]
        if sizes:
            raise InputError(f"give at least one typical case of {fn.name}'s integer "
                             "parameters: --case " + ",".join(f"{s}=VALUE" for s in sizes),
                             field="--case")
        req.cases = [{}]  # no integer parameter: its sizes are fixed in the code, one case
    return ctx


def fn_returns(sf: SourceFile, fn: Function, typedefs: dict[str, str] | None = None
               ) -> str | None:
    head = sf.data[fn.start:fn.body_start].decode()
    head = head[:head.find(fn.name)] if fn.name in head else head
    head = re.sub(r"\b(static|inline|extern|__inline__|__attribute__\s*\(\(.*?\)\)|"
                  r"\"C\"|constexpr|__global__|__device__|__host__|__forceinline__|"
                  r"__noinline__)\b|__launch_bounds__\s*\((?:[^()]|\([^()]*\))*\)", " ", head)
    words = resolve_type(" ".join(head.split()), typedefs or {})
    if words in ("", "void"):
        return None
    return words if words in DTYPE_OF else "unsupported:" + words
