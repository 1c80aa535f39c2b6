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
from dataclasses import dataclass
from pathlib import Path

from kernelcrew.errors import ExprError, InputError
from kernelcrew.kernels.derived import DerivedReference
from kernelcrew.kernels.expr import evaluate, names_in
from kernelcrew.kernels.importer import shapes as S
from kernelcrew.kernels.importer.access import Accesses, analyze
from kernelcrew.kernels.importer.baseline import (
    build_baseline,
    code_of,
    cost_model,
    reference_body,
    size_names,
    tolerance,
)
from kernelcrew.kernels.importer.entry import launch_exprs, signature_order
from kernelcrew.kernels.importer.groups import groups_of, modes
from kernelcrew.kernels.importer.indices import index_ranges
from kernelcrew.kernels.importer.opfiles import (
    OpYaml,
    inputs_py,
    op_yaml,
    reference_args,
    reference_py,
    value_ranges,
)
from kernelcrew.kernels.importer.races import shared_counters
from kernelcrew.kernels.importer.request import (  # noqa: F401 - the CLI's parsers
    Code,
    Context,
    ImportRequest,
    fn_returns,
    parse_assignments,
    parse_case,
    parse_defines,
    read_request,
)
from kernelcrew.kernels.importer.roles import (
    INT_LIMITS,
    SIZE_TYPES,
    Role,
    RoleFlags,
    assign_roles,
    err,
)
from kernelcrew.kernels.importer.screen import screen_generated
from kernelcrew.kernels.importer.source import find_function, join_continuations, source_of_text
from kernelcrew.kernels.spec import INT_INPUTS


@dataclass
class ImportResult:
    folder: Path
    op_name: str
    entry: str
    warnings: list[str]
    notes: list[str]
    reference: str  # derived | given
    baseline: str = "baseline.cpp"  # or baseline.cu


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


def _roles(ctx: Context, code: Code) -> tuple[list[Role], Accesses]:
    req = ctx.req
    arrays = {p.name for p in ctx.xfn.params if p.pointer}
    sizes = size_names(ctx)
    acc = analyze(ctx.xfn.node, ctx.xsf.data, arrays, sizes, _helpers(ctx, code))
    for x in [*acc.accesses, *acc.escapes]:  # lines of the expansion -> lines of the file
        if 0 < x.line <= len(ctx.xlines):
            x.line = ctx.xlines[x.line - 1]
    ctx.warnings += shared_counters(
        ctx.xfn.node, ctx.xsf.data,
        lambda r: ctx.xlines[r] if r < len(ctx.xlines) else r + 1)
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
    inferred = {r.param.name: S.inferred_shape(needs[r.param.name], acc.atoms) for r in arrays}
    missing = [r for r in arrays
               if r.param.name not in ctx.req.shapes and inferred[r.param.name] is None]
    if missing:
        r, n = missing[0], needs[missing[0].param.name]
        why = f" ({n.unknown})" if n.unknown else ""
        # an example in this function's terms: what another array's subscripts reach
        like = next((f"{','.join(d)} (what the code reaches in {k})"
                     for k, d in inferred.items() if d is not None), None)
        like = like or ('*'.join(sorted(sizes)[:2]) or 'n')
        more = f" (and {', '.join(repr(m.param.name) for m in missing[1:])})" \
            if len(missing) > 1 else ""
        raise err(ctx.sf, max(r.param.line, ctx.fn.line),
                  f"parameter {r.param.name!r}{more} needs a shape: the code does not show "
                  f"its extent{why}; add --shape {r.param.name}=EXPR in the sizes "
                  f"({', '.join(sorted(sizes))}), e.g. --shape {r.param.name}={like}")
    for r in arrays:
        n = needs[r.param.name]
        given = ctx.req.shapes.get(r.param.name)
        if given is not None:
            dims = _given_dims(r, given, sizes, ctx.fn.name)
        else:
            dims = inferred[r.param.name]
            inferred_names.append(f"{r.param.name}=[{', '.join(dims)}]")
        S.check(n, dims, given is not None, labeled, acc.atoms, inferred[r.param.name],
                ctx.src)
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


def _int_notes(ctx: Context, roles: list[Role], indices: dict) -> None:
    """What the default integer inputs are, for those neither --values nor the code's
    indexing (`indices`, keyed by op.yaml name) gives a range."""
    for r in roles:
        if r.param.name in ctx.req.values or r.kind not in ("input", "inout") or \
                {r.param.name, f"{r.param.name}_in"} & indices.keys():
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
    ctx = read_request(req)
    code, _ = code_of(ctx)  # UnresolvedMacro: one line, exit 2
    roles, acc = _roles(ctx, code)
    launch = _launch(ctx, roles)
    op_name, folder = _folder(ctx)
    size_params = {r.param.name for r in roles if r.kind == "size"}
    groups = groups_of(req.cases, modes(ctx.xfn.node, ctx.xsf.data, size_params)
                       if ctx.xfn.node is not None else frozenset())
    _shapes(ctx, roles, acc, groups)
    _drop_empty_cases(ctx, roles, groups)
    ret = fn_returns(ctx.xsf, ctx.xfn, ctx.typedefs)
    sig = signature_order(roles, ret)
    shapes = {r.param.name: r.shape for r in roles if r.kind in ("input", "output", "inout")}
    # an array read and written is split into NAME_in (input) and NAME (output), one shape
    shapes.update({f"{r.param.name}_in": r.shape for r in roles if r.kind == "inout"})
    if ret is not None:
        shapes["result"] = ["1"]
    indices, said = index_ranges(ctx.xfn.node, ctx.xsf.data, roles, set(req.values)) \
        if ctx.xfn.node is not None else ({}, [])  # integer inputs the code indexes with
    _int_notes(ctx, roles, indices)
    ctx.notes += said
    _size_checks(ctx, roles, shapes)
    b = build_baseline(ctx, roles, launch)
    cost_bytes, flops, terms = cost_model(ctx, b, roles, shapes, sig)
    sizes = [r.param.name for r in roles if r.kind == "size"]
    reference_kind = "given" if req.reference else "derived"
    ref_body = None if req.reference else reference_body(ctx, b, launch)
    ranges = value_ranges(req.values, roles, sizes)
    ranges.update(indices)

    ctx.notes[:] = list(dict.fromkeys(ctx.notes))  # a helper's loops are read per call site
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
        ref = DerivedReference(folder / "reference64.cpp", entry=b.entry.entry,
                               args=reference_args(sig, shapes, roles, sizes),
                               openmp=b.calls_omp)
        ctx.notes += screen_generated(ref, groups, {r.param.name: float(r.value) for r in roles
                                                    if r.kind == "scalar"}, ranges)
    fn_text = join_continuations(ctx.fn.item.text(ctx.sf.data))
    (folder / "op.yaml").write_text(op_yaml(OpYaml(
        op_name=op_name, fn=ctx.fn, src=ctx.src, sig=sig, shapes=shapes, roles=roles,
        sizes=sizes, cost_bytes=cost_bytes, flops=flops,
        tol=tolerance(fn_text, terms, roles, ret), groups=groups, reference=reference_kind,
        warnings=ctx.warnings, notes=ctx.notes, family=req.family,
        digest=hashlib.sha256(ctx.sf.data).hexdigest(), entry=b.entry.entry, flags=b.flags,
        build=ctx.unit.build.as_list(), backend="cuda" if ctx.cuda else "cpu",
        base_name=base_name)))
    return ImportResult(folder, op_name, b.entry.entry, ctx.warnings, ctx.notes,
                        reference_kind, base_name)
