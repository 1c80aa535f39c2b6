"""`kernelcrew import`: one function from a C/C++ file -> an operator folder.

    baseline.cpp     the function and what it needs from its file and the project headers
                     it includes (helpers, macros, constants, types, allow-listed
                     includes), unchanged, plus a generated `extern "C"` entry in
                     kernelcrew's calling convention;
    op.yaml          sizes, dtypes, shapes, typical/boundary/unaligned groups, a cost model
                     estimated from the code, a tolerance to edit, and `origin:` (where the
                     code came from, the build flags it was read with, whether the
                     reference is derived, promotion warnings);
    reference.py     unless one is given: the same code promoted to float64 on its syntax
    reference64.cpp  tree (see promote.py), compiled and called through ctypes.

The file is read as its build reads it (unit.py, preprocess.py); types, roles and shapes
come from the function with its macros expanded (roles.py, access.py, shapes.py); the
generated parts are in entry.py and opfiles.py, the checks in checks.py.
"""

from __future__ import annotations

import hashlib
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from kernelcrew.errors import ExprError, InputError
from kernelcrew.kernels.expr import evaluate, names_in
from kernelcrew.kernels.importer import shapes as S
from kernelcrew.kernels.importer import vla
from kernelcrew.kernels.importer.access import Accesses, analyze
from kernelcrew.kernels.importer.checks import check_policy, syntax_check
from kernelcrew.kernels.importer.cost import estimate_flops
from kernelcrew.kernels.importer.cuda import EMULATION, check_emulable, device_text, nvcc_check
from kernelcrew.kernels.importer.entry import (
    EntrySpec,
    assemble,
    cuda_front,
    entry_text,
    front,
    includes,
    launch_exprs,
    signature_order,
)
from kernelcrew.kernels.importer.opfiles import (
    OpYaml,
    inputs_py,
    op_yaml,
    reference_py,
    value_ranges,
)
from kernelcrew.kernels.importer.preprocess import BuildFlags, from_compile_commands, parse_define
from kernelcrew.kernels.importer.promote import promote
from kernelcrew.kernels.importer.roles import (
    DTYPE_OF,
    INT_LIMITS,
    ITEMSIZE,
    SIZE_TYPES,
    Role,
    RoleFlags,
    assign_roles,
    base_type,
    err,
    resolve_type,
    typedef_table,
)
from kernelcrew.kernels.importer.source import (
    Function,
    Item,
    SourceFile,
    find_function,
    join_continuations,
    source_of_text,
)
from kernelcrew.kernels.importer.unit import Unit, closure, expanded_function, load_unit
from kernelcrew.kernels.spec import INT_INPUTS

Code = list[tuple[SourceFile, Item, str]]  # (file, item, its text) in compile order


@dataclass
class ImportResult:
    folder: Path
    op_name: str
    entry: str
    warnings: list[str]
    notes: list[str]
    reference: str  # derived | given
    baseline: str = "baseline.cpp"  # or baseline.cu


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


# ---------------------------------------------------------------- groups

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


def groups_of(cases: list[dict[str, int]]) -> dict[str, list[dict[str, int]]]:
    boundary = _dedupe([c for t in cases[:1] for c in boundary_cases(t)], cases)
    return {"typical": cases, "boundary": boundary,
            "unaligned": _dedupe(unaligned_cases(cases), cases + boundary)}


# ---------------------------------------------------------------- the request

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


def _read(req: ImportRequest) -> Context:
    src = Path(req.source).resolve()
    req.source = src
    unit = load_unit(src, req.build())
    fn = find_function(unit.main, req.function)
    xsf, xfn, xlines = expanded_function(unit, fn)
    if len(xfn.params) != len(fn.params) and unit.pp is not None:
        fn = Function(fn.name, fn.line, fn.start, fn.end, fn.body_start, xfn.params,
                      fn.is_global, fn.item, fn.node)  # a macro that declares several
    for p0, p in zip(fn.params, xfn.params, strict=False):
        p.line = p0.line  # messages name the line in the file, not in the expansion
    typedefs = typedef_table(unit.pp.text()) if unit.pp else typedef_table(unit.main.text)
    ctx = Context(req, src, unit, fn, xsf, xfn, typedefs, fn.is_global, notes=unit.notes,
                  xlines=xlines)
    if ctx.cuda and not req.block:
        raise err(ctx.sf, fn.line, f"{fn.name} is a CUDA __global__ function: give its "
                                   "launch, e.g. --grid 'ceil_div(n, 256)' --block 256")
    if not ctx.cuda and (req.grid or req.block):
        raise err(ctx.sf, fn.line, f"{fn.name} is not a __global__ function: --grid/--block "
                                   "are for CUDA kernels")
    if not req.cases:
        raise InputError("give at least one typical case: --case SIZE=VALUE,SIZE=VALUE",
                         field="--case")
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


# ---------------------------------------------------------------- analysis

def _helpers(ctx: Context, code: Code) -> dict[str, tuple[object, bytes]]:
    """The functions the imported one calls, with their macros expanded, for access.py."""
    out: dict[str, tuple[object, bytes]] = {}
    for sf, it, _text in code:
        if it.node_type != "function_definition" or it is ctx.fn.item:
            continue
        text = it.text(sf.data)
        if ctx.unit.pp is not None:
            text = ctx.unit.pp.expanded(sf.path, it.line, sf.line_of(max(it.end - 1, 0))) \
                or text
        hsf = source_of_text(text, sf.path)
        for name in it.defines:
            try:
                h = find_function(hsf, name)
            except InputError:
                continue
            out[name] = (h.node, hsf.data)
    return out


def _size_names(ctx: Context) -> set[str]:
    return {p.name for p in ctx.xfn.params if not p.pointer
            and resolve_type(base_type(p), ctx.typedefs) in SIZE_TYPES}


def _roles(ctx: Context, code: Code) -> tuple[list[Role], Accesses]:
    req = ctx.req
    arrays = {p.name for p in ctx.xfn.params if p.pointer}
    sizes = _size_names(ctx)
    acc = analyze(ctx.xfn.node, ctx.xsf.data, arrays, sizes, _helpers(ctx, code))
    for x in [*acc.accesses, *acc.escapes]:  # lines of the expansion -> lines of the file
        if 0 < x.line <= len(ctx.xlines):
            x.line = ctx.xlines[x.line - 1]
    flags = RoleFlags(req.inputs, req.outputs, req.scalars, req.shapes, req.cases)
    roles = assign_roles(ctx.sf, ctx.fn, ctx.xfn, ctx.typedefs, acc, flags, ctx.notes)
    ret = fn_returns(ctx.xsf, ctx.xfn, ctx.typedefs)
    if not any(r.kind in ("output", "inout") for r in roles) and ret is None:
        raise err(ctx.sf, ctx.fn.line, f"{ctx.fn.name} has no output: name the arrays it "
                                       "writes with --outputs")
    return roles, acc


def _shapes(ctx: Context, roles: list[Role], acc: Accesses,
            groups: dict[str, list[dict[str, int]]]) -> None:
    """Each array's shape: given (and checked against the code) or inferred."""
    sizes = {r.param.name for r in roles if r.kind == "size"}
    arrays = [r for r in roles if r.kind in ("input", "output", "inout")]
    needs = S.needs([r.param for r in arrays], acc, sizes)
    labeled = [(f"--case {i + 1}" if g == "typical" else f"the generated {g} case", c)
               for g, cases in groups.items() for i, c in enumerate(cases)]
    inferred_names = []
    for r in arrays:
        n = needs[r.param.name]
        inferred = S.inferred_shape(n, acc.atoms)
        given = ctx.req.shapes.get(r.param.name)
        if given is not None:
            dims = _given_dims(r, given, sizes, ctx.fn.name)
        elif inferred is not None:
            dims = inferred
            inferred_names.append(f"{r.param.name}=[{', '.join(dims)}]")
        else:
            why = f" ({n.unknown})" if n.unknown else ""
            raise err(ctx.sf, max(r.param.line, ctx.fn.line),
                      f"parameter {r.param.name!r} needs a shape: the code does not show "
                      f"its extent{why}; add --shape {r.param.name}=EXPR in the sizes "
                      f"({', '.join(sorted(sizes))}), e.g. --shape {r.param.name}="
                      f"{'*'.join(sorted(sizes)[:2]) or 'n'}")
        S.check(n, dims, given is not None, labeled, acc.atoms, inferred, ctx.src)
        r.shape = dims
    if inferred_names:
        ctx.notes.append("shapes inferred from the code (declared extents, loop bounds and "
                         "subscripts): " + "; ".join(inferred_names))


def _given_dims(r: Role, given: str, sizes: set[str], fn_name: str) -> list[str]:
    dims = [d.strip() for d in given.split(",") if d.strip()]
    for d in dims:
        try:
            unknown = names_in(d) - sizes
        except ExprError as e:
            raise InputError(f"--shape {r.param.name}={given}: {e}", field="--shape") from None
        if unknown:
            raise InputError(f"--shape {r.param.name}={given}: {sorted(unknown)} are not "
                             f"integer parameters of {fn_name} ({', '.join(sorted(sizes))})",
                             field="--shape")
    return dims


def _drop_empty_cases(ctx: Context, roles: list[Role],
                      groups: dict[str, list[dict[str, int]]]) -> None:
    """Generated cases where a shape is empty or negative (`(h - k)//s + 1` at tiny sizes)
    are left out, with a note; a typical case like that is the user's error."""
    for g, cases in groups.items():
        keep = []
        for c in cases:
            bad = [r.param.name for r in roles if r.shape and _numel(r.shape, c) < 1]
            if not bad:
                keep.append(c)
            elif g == "typical":
                raise InputError(f"--case {cases.index(c) + 1}: {', '.join(bad)} would have no "
                                 "elements with these sizes", field="--case")
            else:
                ctx.notes.append(f"generated {g} case {c} left out: {', '.join(bad)} would "
                                 "have no elements")
        groups[g] = keep


def _numel(dims: list[str], case: dict[str, int]) -> int:
    n = 1
    try:
        for d in dims:
            n *= evaluate(d, case)
    except (ExprError, ZeroDivisionError, KeyError):
        return 0
    return n


def _size_checks(ctx: Context, roles: list[Role], shapes: dict[str, list[str]]) -> None:
    """Sizes the entry narrows must fit; int-indexed code must not overflow on the cases."""
    for i, c in enumerate(ctx.req.cases):
        for r in roles:
            if r.kind != "size":
                continue
            lim = SIZE_TYPES[r.ctype]
            v = c[r.param.name]
            if lim and (v < INT_LIMITS[lim[0]] or (lim[1] and v > INT_LIMITS[lim[1]])):
                raise InputError(f"--case {i + 1}: {r.param.name}={v} does not fit the "
                                 f"function's `{r.param.text}`", field="--case")
        if any(r.ctype in ("int", "int32_t") for r in roles if r.kind == "size"):
            for name, dims in shapes.items():
                if _numel(dims, c) > 2**31 - 1:
                    ctx.warnings.append(f"--case {i + 1}: {name} has {_numel(dims, c)} "
                                        "elements, more than an int can index; the original "
                                        "code may overflow there")


def _int_notes(ctx: Context, roles: list[Role]) -> None:
    for r in roles:
        if r.param.name in ctx.req.values or r.kind not in ("input", "inout"):
            continue
        if r.dtype in INT_INPUTS:
            lo, hi = INT_INPUTS[r.dtype]
            ctx.notes.append(f"{r.param.name} is a {r.dtype} array: default inputs cover "
                             f"{lo} to {hi - 1}; if it holds indices or a narrower range, "
                             f"give --values {r.param.name}=LO:HI")
        elif r.dtype[0] in "iu":
            ctx.notes.append(f"{r.param.name} is an integer array: default inputs are small "
                             "integers from -8 to 8; if it holds indices, give --values "
                             f"{r.param.name}=LO:HI (token ids: --values "
                             f"{r.param.name}=0:VOCAB)")


# ---------------------------------------------------------------- the baseline

@dataclass
class Baseline:
    text: str  # front matter + body
    body: str
    line_map: list
    code: Code
    flags: list[str]
    uses_omp: bool
    calls_omp: bool
    preamble: list[str]
    entry: EntrySpec


def _code(ctx: Context) -> tuple[Code, list[str]]:
    # without a preprocessor the given defines stand in for the file's own definitions
    skip = set() if ctx.unit.pp is not None else set(ctx.req.defines)
    items, used_defines = closure(ctx.unit, ctx.fn, skip=skip)
    code = []
    for sf, it in items:
        if it is ctx.fn.item and ctx.cuda:
            text = device_text(ctx.fn, sf)
        elif it is ctx.fn.item:
            text, ctx.flat = vla.lower(it.text(sf.data), ctx.fn, ctx.xfn, _size_names(ctx))
        else:
            text = it.text(sf.data)
        code.append((sf, it, join_continuations(text).rstrip()))
    for sf, it, _t in code:
        if ctx.cuda and it is not ctx.fn.item and it.node_type == "function_definition" \
                and "__global__" in it.text(sf.data).split("{", 1)[0]:
            raise err(sf, it.line, f"{ctx.fn.name} needs another __global__ function "
                                   f"({'/'.join(it.defines)}); import kernels that launch "
                                   "nothing")
    return code, used_defines


def _preamble(ctx: Context, code: Code, used_defines: list[str]) -> list[str]:
    texts = [t for _sf, _it, t in code]
    out = [f"#include <{h}>" for h in includes(ctx.unit.system_includes(), cuda=ctx.cuda)]
    if any(re.search(r"\brestrict\b", t) for t in texts):
        out.append("#define restrict __restrict__  // C99 `restrict` in C++")
    if any(re.search(r"\bregister\b", t) for t in texts):
        out.append("#define register  // C's `register` storage class (C++17 has none)")
    build = ctx.unit.build.defines
    # the -D defines the code reads (every one where no preprocessor chose for it)
    defines = {k: build[k] for k in used_defines if k in build} if ctx.unit.pp is not None \
        else dict(ctx.req.defines)
    out += [f"#define {k} {v}  // --define" for k, v in defines.items()]
    return out


def _entry_spec(ctx: Context, roles: list[Role], launch) -> EntrySpec:
    ret = fn_returns(ctx.xsf, ctx.xfn, ctx.typedefs)
    orig = {}
    for p0, p in zip(ctx.fn.params, ctx.xfn.params, strict=False):
        # the file's own spelling where the declaration reads as a plain array (`float
        # c[N][M]`); the expanded one where a macro builds it (`POLYBENCH_2D(A, ...)`)
        if p0.name == p.name and p0.pointer == p.pointer and len(p0.dims) == len(p.dims):
            orig[p.name] = (p0.base, p0.dims)
    return EntrySpec(ctx.fn, roles, f"{ctx.fn.name}_entry", ret, ctx.cuda, launch, orig,
                     ctx.flat)


def _baseline(ctx: Context, roles: list[Role], launch) -> Baseline:
    req = ctx.req
    code, used_defines = _code(ctx)
    texts = [t for _sf, _it, t in code]
    uses_omp = any(re.search(r"#\s*pragma\s+omp\b|\bomp_\w+\s*\(", t) for t in texts)
    calls_omp = any(re.search(r"\bomp_\w+\s*\(", t) for t in texts)
    flags = list(req.flags) if req.flags else (["-O3"] if ctx.cuda else ["-O2"])
    if uses_omp and not ctx.cuda and "-fopenmp" not in flags:
        flags.append("-fopenmp")
    if ctx.src.suffix.lower() == ".c" and "-fpermissive" in flags:
        flags.remove("-fpermissive")
    preamble = _preamble(ctx, code, used_defines)
    spec = _entry_spec(ctx, roles, launch)
    if spec.ret is not None and spec.ret.startswith("unsupported:"):
        raise err(ctx.sf, ctx.fn.line, f"{ctx.fn.name} returns {spec.ret.split(':', 1)[1]!r};"
                                       " only void or a float/double/int result can be "
                                       "imported")
    body, line_map = assemble(ctx.src, ctx.fn, preamble, code,
                              entry_text(spec, float64=False), ctx.cuda)
    if ctx.cuda:
        sig = signature_order(roles, spec.ret)
        sizes = [r.param.name for r in roles if r.kind == "size"]
        fm = cuda_front(spec.entry, flags, launch, req.shared_bytes or "0", sig, roles, sizes)
    else:
        fm = front(spec.entry, flags)
    text = fm + body
    check_policy(ctx.src, body, line_map, "cuda" if ctx.cuda else "cpu")
    if ctx.cuda:
        nvcc_check(ctx.sf, text, [w[1] if w else None for w in line_map], fm.count("\n"),
                   req.nvcc)
    else:
        syntax_check(ctx.src, text, line_map, fm.count("\n"),
                     ctx.unit.pp.missing if ctx.unit.pp else [])
    return Baseline(text, body, line_map, code, flags, uses_omp, calls_omp, preamble, spec)


# ---------------------------------------------------------------- cost and reference

def _cost(ctx: Context, b: Baseline, roles: list[Role], shapes: dict[str, list[str]],
          sig) -> tuple[str, str, dict[str, int]]:
    sizes = [r.param.name for r in roles if r.kind == "size"]
    helpers = {}
    for sf, it, t in b.code:
        if it.node_type == "function_definition" and it is not ctx.fn.item:
            x = ctx.unit.pp.expanded(sf.path, it.line, sf.line_of(max(it.end - 1, 0))) \
                if ctx.unit.pp else ""
            helpers.update({n: x or t for n in it.defines})
    fn_text = ctx.xsf.data[ctx.xfn.start:ctx.xfn.end].decode() if ctx.unit.pp else \
        join_continuations(ctx.fn.item.text(ctx.sf.data))
    float_types = frozenset(t for t in ctx.typedefs
                            if resolve_type(t, ctx.typedefs) in ("float", "double", "_Float16"))
    flops = estimate_flops(fn_text, helpers, set(sizes), where=ctx.src.name,
                           first_line=ctx.fn.line, float_types=float_types)
    ctx.notes.extend(flops.notes)
    if ctx.cuda and "1" in flops.terms:  # straight-line work runs once per thread
        outs = [shapes[n] for n, k, _ in sig if k == "output"]
        per = "*".join(outs[0]) if outs else "1"
        flops.terms[per] = flops.terms.get(per, 0) + flops.terms.pop("1")
        ctx.notes.append(f"cost: the kernel's straight-line flops counted once per element "
                         f"of the first output ({per})")
    byte_terms: dict[str, int] = {}
    for name, _kind, dtype in sig:
        key = "*".join(f"({d})" if re.search(r"[+\-]", d) else d for d in shapes[name]) or "1"
        byte_terms[key] = byte_terms.get(key, 0) + ITEMSIZE[dtype]
    return " + ".join(f"{v}*{k}" for k, v in byte_terms.items()), flops.expr(), flops.terms


def _reference_body(ctx: Context, b: Baseline, launch) -> str:
    if ctx.cuda:
        check_emulable(ctx.sf, [(it, t) for _sf, it, t in b.code])
    promoted = []
    for sf, it, text in b.code:
        pr = promote(text, first_line=it.line, where=sf.path.name)
        ctx.warnings += [w for w in pr.warnings if w not in ctx.warnings]
        promoted.append((sf, it, pr.text))
    ref_entry = entry_text(b.entry, float64=True)
    if ctx.cuda:
        return EMULATION + "\n".join(
            [f"#define {k} {v}" for k, v in ctx.req.defines.items()]
            + [f"\n// {sf.path.name}:{it.line}\n{t}" for sf, it, t in promoted]
            + ["", ref_entry])
    body, _ = assemble(ctx.src, ctx.fn, b.preamble, promoted, ref_entry, False)
    return body.replace("#include <climits>", "#include <climits>\n#include <cfloat>", 1)


def _tolerance(fn_text: str, terms: dict[str, int], roles: list[Role], ret: str | None
               ) -> tuple[str, str]:
    reductions = bool(re.search(r"\+=|\bsum\b|\bacc", fn_text)) or any(
        k.count("*") >= 2 for k in terms)
    tol = ("1.0e-4", "1.0e-4") if reductions else ("1.0e-4", "1.0e-5")
    outs = [r.dtype for r in roles if r.kind in ("output", "inout")] + \
        ([DTYPE_OF[ret]] if ret is not None else [])
    if outs and all(d[0] in "iu" for d in outs):
        tol = ("0.0", "0.0")  # integer results: exact
    return tol


# ---------------------------------------------------------------- the import

def _folder(ctx: Context) -> tuple[str, Path]:
    req = ctx.req
    op_name = req.name or re.sub(r"[^a-z0-9_]", "_", ctx.fn.name.lower())
    if not re.fullmatch(r"[a-z0-9_]+", op_name):
        raise InputError(f"--name {op_name!r}: use lowercase letters, digits and _",
                         field="--name")
    folder = Path(req.out) if req.out else Path.cwd() / op_name
    if folder.exists() and any(folder.iterdir()) and not req.force:
        raise InputError("the output folder exists and is not empty; choose another --out or "
                         "pass --force", path=folder)
    return op_name, folder


def _launch(ctx: Context, roles: list[Role]) -> tuple[list[str], list[str]] | None:
    if not ctx.cuda:
        return None
    if any(r.kind == "inout" for r in roles):
        raise err(ctx.sf, ctx.fn.line, "a CUDA kernel's array that is read and written is "
                                       "not supported by the import; give it as an output "
                                       "only if it is not read")
    launch = (launch_exprs(ctx.req.grid or ["1"], "--grid", roles),
              launch_exprs(ctx.req.block, "--block", roles))
    launch_exprs([ctx.req.shared_bytes or "0"], "--shared-bytes", roles)
    return launch


def import_function(req: ImportRequest) -> ImportResult:
    ctx = _read(req)
    code, _ = _code(ctx)  # UnresolvedMacro: one line, exit 2
    roles, acc = _roles(ctx, code)
    launch = _launch(ctx, roles)
    op_name, folder = _folder(ctx)
    groups = groups_of(req.cases)
    _shapes(ctx, roles, acc, groups)
    _drop_empty_cases(ctx, roles, groups)
    ret = fn_returns(ctx.xsf, ctx.xfn, ctx.typedefs)
    sig = signature_order(roles, ret)
    shapes = {r.param.name: r.shape for r in roles if r.kind in ("input", "output", "inout")}
    # an array read and written is split into NAME_in (input) and NAME (output), one shape
    shapes.update({f"{r.param.name}_in": r.shape for r in roles if r.kind == "inout"})
    if ret is not None:
        shapes["result"] = ["1"]
    _int_notes(ctx, roles)
    _size_checks(ctx, roles, shapes)
    b = _baseline(ctx, roles, launch)
    cost_bytes, flops, terms = _cost(ctx, b, roles, shapes, sig)
    sizes = [r.param.name for r in roles if r.kind == "size"]
    reference_kind = "given" if req.reference else "derived"
    ref_body = None if req.reference else _reference_body(ctx, b, launch)
    ranges = value_ranges(req.values, roles, sizes)

    folder.mkdir(parents=True, exist_ok=True)
    base_name = "baseline.cu" if ctx.cuda else "baseline.cpp"
    (folder / base_name).write_text(b.text)
    if ranges:
        (folder / "inputs.py").write_text(inputs_py(ctx.fn.name, ranges))
    if req.reference:
        shutil.copyfile(req.reference, folder / "reference.py")
    else:
        (folder / "reference64.cpp").write_text(
            "// kernelcrew import: the float64 build of the baseline (float promoted to double "
            "on the syntax tree).\n" + ref_body)
        (folder / "reference.py").write_text(reference_py(ctx.src, ctx.fn, b.entry.entry, sig,
                                                          shapes, roles, sizes, b.calls_omp))
    fn_text = join_continuations(ctx.fn.item.text(ctx.sf.data))
    (folder / "op.yaml").write_text(op_yaml(OpYaml(
        op_name=op_name, fn=ctx.fn, src=ctx.src, sig=sig, shapes=shapes, roles=roles,
        sizes=sizes, cost_bytes=cost_bytes, flops=flops,
        tol=_tolerance(fn_text, terms, roles, ret), groups=groups, reference=reference_kind,
        warnings=ctx.warnings, notes=ctx.notes, family=req.family,
        digest=hashlib.sha256(ctx.sf.data).hexdigest(), entry=b.entry.entry, flags=b.flags,
        build=ctx.unit.build.as_list(), backend="cuda" if ctx.cuda else "cpu",
        base_name=base_name)))
    return ImportResult(folder, op_name, b.entry.entry, ctx.warnings, ctx.notes,
                        reference_kind, base_name)
