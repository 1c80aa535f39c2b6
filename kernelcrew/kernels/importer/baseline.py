"""The imported baseline: the code the function needs (unit.py's closure, C99 VLA
parameters lowered), the preamble, the generated entry, the checks; then the cost model
read from the code and the float64 reference built from the same items."""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from kernelcrew.kernels.importer import vla
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
    signature_order,
)
from kernelcrew.kernels.importer.promote import promote
from kernelcrew.kernels.importer.request import Code, Context, fn_returns, read_request
from kernelcrew.kernels.importer.roles import (
    DTYPE_OF,
    ITEMSIZE,
    SIZE_TYPES,
    Role,
    base_type,
    err,
    resolve_type,
)
from kernelcrew.kernels.importer.source import SourceFile, join_continuations
from kernelcrew.kernels.importer.unit import closure


def size_names(ctx: Context) -> set[str]:
    return {p.name for p in ctx.xfn.params if not p.pointer
            and resolve_type(base_type(p), ctx.typedefs) in SIZE_TYPES}


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


def code_of(ctx: Context) -> tuple[Code, list[str]]:
    # without a preprocessor the given defines stand in for the file's own definitions
    skip = set() if ctx.unit.pp is not None else set(ctx.req.defines)
    items, used_defines = closure(ctx.unit, ctx.fn, skip=skip)
    code = []
    for sf, it in items:
        if it is ctx.fn.item and ctx.cuda:
            text = device_text(ctx.fn, sf)
        elif it is ctx.fn.item:
            text, ctx.flat = vla.lower(it.text(sf.data), ctx.fn, ctx.xfn, size_names(ctx))
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


def build_baseline(ctx: Context, roles: list[Role], launch) -> Baseline:
    req = ctx.req
    code, used_defines = code_of(ctx)
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


def cost_model(ctx: Context, b: Baseline, roles: list[Role], shapes: dict[str, list[str]],
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


# vector types and intrinsics (x86 SSE/AVX, Arm NEON/SVE): float lanes with no float64 build
_SIMD = re.compile(r"\b(__m(?:64|128|256|512)[dhi]?|_mm\d*_\w+|(?:float|int|uint)\d+x\d+(?:x\d+)?_t|"
                   r"sv(?:float|int|uint)\w*_t|v\w+q_f(?:16|32|64))\b")
# what compilers define for the instruction sets: undefined, a file's `#ifdef __SSE__` takes
# its portable path
ISA_MACROS = ["__MMX__", "__SSE__", "__SSE2__", "__SSE3__", "__SSSE3__", "__SSE4_1__",
              "__SSE4_2__", "__AVX__", "__AVX2__", "__FMA__", "__F16C__", "__AVX512F__",
              "__AVX512BW__", "__AVX512DQ__", "__AVX512VL__", "__AVX512CD__", "__ARM_NEON",
              "__ARM_NEON__", "__ARM_FEATURE_SVE", "__ARM_FEATURE_FMA"]


def _simd_line(code: Code) -> tuple[SourceFile, int] | None:
    for sf, it, text in code:
        for k, row in enumerate(text.splitlines()):
            if _SIMD.search(row.split("//", 1)[0]):
                return sf, it.line + k
    return None


def _portable_code(ctx: Context, b: Baseline) -> Code:
    """The code the float64 reference promotes: the baseline's own, or where that uses SIMD
    intrinsics (float lanes, no double build), the path the file takes on a machine
    without them (the instruction-set macros undefined); an error where there is none."""
    simd = None if ctx.cuda else _simd_line(b.code)
    if simd is None:
        return b.code
    sf, line = simd
    why = (f"{ctx.fn.name} uses SIMD intrinsics (`{sf.path.name}` line {line}), which have no "
           "float64 build, and")
    fix = "give your own reference with --reference reference.py"
    if ctx.unit.pp is None:
        raise err(sf, line, f"{why} the file cannot be preprocessed here; {fix}")
    plain = replace(ctx.req, source=ctx.src, cases=list(ctx.req.cases),
                    undefines=[*ctx.req.undefines, *ISA_MACROS])
    code, _ = code_of(read_request(plain))
    still = _simd_line(code)
    if still is not None:
        raise err(still[0], still[1], f"{why} no path of the file avoids them (tried without "
                                      f"the instruction-set macros: -U__SSE__ ...); {fix}")
    ctx.notes.append("the float64 reference is built from the file's portable path (the "
                     "instruction-set macros undefined: -U__SSE__, -U__AVX2__, ...): "
                     f"{ctx.fn.name}'s SIMD intrinsics have no float64 build")
    return code


def reference_body(ctx: Context, b: Baseline, launch) -> str:
    if ctx.cuda:
        check_emulable(ctx.sf, [(it, t) for _sf, it, t in b.code])
    promoted = []
    for sf, it, text in _portable_code(ctx, b):
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


def tolerance(fn_text: str, terms: dict[str, int], roles: list[Role], ret: str | None
               ) -> tuple[str, str]:
    reductions = bool(re.search(r"\+=|\bsum\b|\bacc", fn_text)) or any(
        k.count("*") >= 2 for k in terms)
    tol = ("1.0e-4", "1.0e-4") if reductions else ("1.0e-4", "1.0e-5")
    outs = [r.dtype for r in roles if r.kind in ("output", "inout")] + \
        ([DTYPE_OF[ret]] if ret is not None else [])
    if outs and all(d[0] in "iu" for d in outs):
        tol = ("0.0", "0.0")  # integer results: exact
    return tol
