"""The files of an imported operator folder besides the baseline: op.yaml (sizes, arrays,
cost, tolerance, groups, origin), reference.py (calling the float64 build), and inputs.py
where `--values` gives integer inputs their range."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from kernelcrew.errors import ExprError, InputError
from kernelcrew.kernels.expr import names_in
from kernelcrew.kernels.importer.roles import Role
from kernelcrew.kernels.importer.source import Function


def yaml_str(s: str) -> str:
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _flow(d: dict) -> str:
    return "{" + ", ".join(f"{k}: {v}" for k, v in d.items()) + "}"


@dataclass
class OpYaml:
    """Everything op.yaml says about an imported function."""

    op_name: str
    fn: Function
    src: Path
    sig: list[tuple[str, str, str]]  # (name, input|output, dtype) in signature order
    shapes: dict[str, list[str]]
    roles: list[Role]
    sizes: list[str]
    cost_bytes: str
    flops: str
    tol: tuple[str, str]
    groups: dict[str, list[dict[str, int]]]  # typical, boundary, unaligned
    reference: str  # derived | given
    warnings: list[str]
    notes: list[str]
    family: str
    digest: str
    entry: str
    flags: list[str]
    build: list[str] = field(default_factory=list)  # -I/-D the file was read with
    backend: str = "cpu"
    base_name: str = "baseline.cpp"


_GROUPS = {"typical": ("1.0", ""),
           "boundary": ("0.25", "small sizes in the same order as the first typical case"),
           "unaligned": ("0.5", "the smallest typical case with even sizes made odd")}


def op_yaml(d: OpYaml) -> str:
    return "\n".join(_head(d) + _arrays(d) + _body(d) + _origin(d)) + "\n"


def _head(d: OpYaml) -> list[str]:
    return [
        (f"# Imported from {d.src.name} by `kernelcrew import` (function {d.fn.name}, line "
         f"{d.fn.line})."),
        ("# Generated fields are a starting point: check the shapes, the groups and the "
         "tolerance."),
        f"name: {d.op_name}",
        f"description: {yaml_str(f'{d.fn.name} from {d.src.name}')}",
        (f"family: {d.family}                  # tag for experience retrieval; edit to "
         "elementwise, reduction, matmul, ..."),
        f"sizes: [{', '.join(d.sizes)}]",
    ]


def _arrays(d: OpYaml) -> list[str]:
    def shape(name: str) -> str:
        return "[" + ", ".join(yaml_str(x) if "," in x else x for x in d.shapes[name]) + "]"

    lines = ["inputs:"]
    lines += [f"  {n}: {{dtype: {t}, shape: {shape(n)}}}" for n, k, t in d.sig if k == "input"]
    lines.append("outputs:")
    lines += [f"  {n}: {{dtype: {t}, shape: {shape(n)}}}" for n, k, t in d.sig
              if k == "output"]
    scal = [r for r in d.roles if r.kind == "scalar"]
    if scal:
        lines.append("scalars:")
        lines += [f"  {r.param.name}: {{dtype: {r.dtype}, value: {r.value!r}}}" for r in scal]
    return lines


def _body(d: OpYaml) -> list[str]:
    lines = [
        ("# estimated from the code: bytes = every array read or written once, flops = "
         "float operations in the loops"),
        f"cost: {{bytes: {yaml_str(d.cost_bytes)}, flops: {yaml_str(d.flops)}}}",
        ("# integer results, compared exactly" if d.tol == ("0.0", "0.0") else
         "# float32 against a float64 reference; edit to what your application accepts"),
        f"tolerance: {{rtol: {d.tol[0]}, atol: {d.tol[1]}}}",
        "shapes:",
    ]
    for group, (weight, comment) in _GROUPS.items():
        cases = d.groups.get(group)
        if not cases:
            continue
        if comment:
            lines.append(f"  # generated: {comment}")
        pad = " " * (10 - len(group))
        lines.append(f"  {group}:{pad}{{weight: {weight},{' ' * (5 - len(weight))}cases: "
                     f"[{', '.join(_flow(c) for c in cases)}]}}")
    lines.append(f"baselines: {{{d.backend}: {d.base_name}}}")
    return lines


def _origin(d: OpYaml) -> list[str]:
    lines = [
        ("origin:                           # where the baseline came from "
         "(`kernelcrew export RUN --patch` reads it)"),
        f"  source: {yaml_str(str(d.src))}",
        f"  function: {d.fn.name}",
        f"  line: {d.fn.line}",
        f"  sha256: {d.digest}",
        f"  entry: {d.entry}",
        f"  flags: [{', '.join(d.flags)}]",
    ]
    if d.build:
        lines.append(f"  build: [{', '.join(yaml_str(b) for b in d.build)}]"
                     "   # -I/-D flags the file was read with")
    lines.append(f"  reference: {d.reference}" + (
        "            # reference.py calls reference64.cpp: the same code promoted to float64"
        if d.reference == "derived" else ""))
    if d.warnings:
        lines.append("  warnings:                       # where results need care: float64 "
                     "promotion changing semantics, data races in the original")
        lines += [f"    - {yaml_str(w)}" for w in d.warnings]
    else:
        lines.append("  warnings: []")
    if d.notes:
        lines.append("  notes:")
        lines += [f"    - {yaml_str(n)}" for n in d.notes]
    return lines


def value_ranges(values: dict[str, str], roles: list[Role], sizes: set[str] | list[str]
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


def inputs_py(function: str, ranges: dict[str, tuple[str, list[str], str, str]]) -> str:
    rows = "\n".join(f"    {n!r}: ({d!r}, {s!r}, {lo!r}, {hi!r}),"
                     for n, (d, s, lo, hi) in ranges.items())
    return (f'''"""Inputs of {function}, from `kernelcrew import` (--values, or the code's use of an
integer input as indices): the arrays named here hold integers drawn from [LO, HI)
(expressions in the sizes); the others get the defaults."""

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


def reference_args(sig, shapes, roles, sizes) -> list[tuple[str, str, str, list[str]]]:
    """(name, kind, dtype, shape) of the float64 entry's arguments, in its order."""
    order = ([(n, "input") for n, k, _ in sig if k == "input"]
             + [(n, "output") for n, k, _ in sig if k == "output"]
             + [(r.param.name, "scalar") for r in roles if r.kind == "scalar"]
             + [(s, "size") for s in sizes])
    dtypes = {n: d for n, _, d in sig}
    return [(n, k, dtypes.get(n, "float64"), shapes.get(n, [])) for n, k in order]


def reference_py(src: Path, fn: Function, entry: str, sig, shapes, roles, sizes,
                  uses_omp: bool) -> str:
    spec = reference_args(sig, shapes, roles, sizes)
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
