"""The operator's contract as an author sees it: the arrays with their dtypes and shapes,
the scalars, the tolerance, and each shape group with its weight and the sizes it spans.

An author must write a kernel that is right and fast for every size the contract allows,
not for the benchmark's cases: the sizes of a group are shown as ranges between powers of
ten (a range never starts or ends at one of the group's own sizes), with what matters for
correctness (odd sizes, sizes that are not a multiple of a vector width, a size of one).
The exact cases stay with the judge. `redact` takes case labels and case sizes out of
texts written by the measuring tools before they reach a prompt.
"""

from __future__ import annotations

import math
import re

from pydantic import BaseModel, Field

from kernelcrew.kernels.spec import OpSpec

VECTOR_WIDTHS = (16, 8)  # elements: AVX-512 floats, AVX2 floats


class ArrayInfo(BaseModel):
    name: str
    role: str  # input | output
    dtype: str
    shape: list[str]


class GroupInfo(BaseModel):
    name: str
    weight: float
    ranges: dict[str, str] = Field(default_factory=dict)  # size symbol -> "10^5 to 10^7"
    traits: list[str] = Field(default_factory=list)  # "odd n", "n = 1", ...


class OperatorContract(BaseModel):
    arrays: list[ArrayInfo] = Field(default_factory=list)
    scalars: list[str] = Field(default_factory=list)  # "alpha: float32 = 1.0"
    sizes: list[str] = Field(default_factory=list)
    groups: list[GroupInfo] = Field(default_factory=list)
    tolerance: str = ""
    cost: str = ""  # the least work any version must do, as formulas in the sizes

    def lines(self) -> list[str]:
        out = [f"Sizes (int64 parameters): {', '.join(self.sizes)}"]
        out += [f"{a.name}: {a.dtype}[{', '.join(a.shape)}] ({a.role})" for a in self.arrays]
        out += [f"scalar {s}" for s in self.scalars]
        if self.tolerance:
            out.append(f"Tolerance: {self.tolerance}")
        if self.cost:
            out.append(f"Least work: {self.cost}")
        for g in self.groups:
            sizes = "; ".join(f"{k} from {v}" for k, v in g.ranges.items())
            traits = f"; includes {', '.join(g.traits)}" if g.traits else ""
            out.append(f"shape group {g.name} (weight {g.weight:g}): {sizes}{traits}")
        return out


def power_of_ten(k: int) -> str:
    return "1" if k == 0 else "10" if k == 1 else f"10^{k}"


def size_range(values: list[int]) -> str:
    """'10^5 to 10^7': powers of ten around the values, never one of the values itself
    (except 1)."""
    lo, hi = min(values), max(values)
    if hi <= 1:
        return "1 to 1"
    k_lo = math.floor(math.log10(max(lo, 1)))
    if lo > 1 and 10 ** k_lo == lo:
        k_lo -= 1
    k_hi = math.floor(math.log10(hi)) + 1
    return f"{power_of_ten(k_lo)} to {power_of_ten(k_hi)}"


def size_traits(symbol: str, values: list[int]) -> list[str]:
    out = []
    if 1 in values:
        out.append(f"{symbol} = 1")
    if any(v % 2 for v in values if v > 1):
        out.append(f"odd {symbol}")
    for w in VECTOR_WIDTHS:
        if any(v % w for v in values if v > 1):
            out.append(f"{symbol} not a multiple of {w}")
            break
    return out


def contract_of(spec: OpSpec) -> OperatorContract:
    arrays = [ArrayInfo(name=n, role="input", dtype=t.dtype, shape=[str(d) for d in t.shape])
              for n, t in spec.inputs.items()]
    arrays += [ArrayInfo(name=n, role="output", dtype=t.dtype, shape=[str(d) for d in t.shape])
               for n, t in spec.outputs.items()]
    groups = []
    for gname, g in spec.shapes.items():
        ranges, traits = {}, []
        for sym in spec.sizes:
            vals = [int(c[sym]) for c in g.cases if sym in c]
            if vals:
                ranges[sym] = size_range(vals)
                traits += size_traits(sym, vals)
        groups.append(GroupInfo(name=gname, weight=g.weight, ranges=ranges, traits=traits))
    return OperatorContract(
        arrays=arrays, sizes=list(spec.sizes), groups=groups,
        scalars=[f"{n}: {s.dtype} = {s.value:g}" for n, s in spec.scalars.items()],
        tolerance=f"rtol={spec.tolerance.rtol:g}, atol={spec.tolerance.atol:g} "
                  "(|got - want| <= atol + rtol*|want|)",
        cost=f"{spec.cost.bytes} bytes, {spec.cost.flops} flops")


def case_sizes(spec: OpSpec) -> set[int]:
    """Every size of every benchmark case."""
    return {int(v) for g in spec.shapes.values() for c in g.cases for v in c.values()}


def redact(text: str, spec: OpSpec, *, min_size: int = 10) -> str:
    """`text` (from a profiler, a rule, a judge's row) without the benchmark's case labels
    ("n=1000000", "typical[0]") or case sizes of `min_size` and above: they become the
    group's name and "N"."""
    if not text:
        return text
    for gname, g in spec.shapes.items():
        for i, c in enumerate(g.cases):
            label = ",".join(f"{k}={v}" for k, v in c.items())
            text = text.replace(f"{gname}[{i}] {label}", f"a {gname} case")
            text = text.replace(label, f"a {gname} case")
        text = re.sub(rf"\b{re.escape(gname)}\[\d+\]", f"a {gname} case", text)
    for v in sorted(case_sizes(spec), reverse=True):
        if v < min_size:
            continue
        for form in {str(v), f"{v:,}", f"{v:_}"}:
            text = re.sub(rf"(?<![\w.]){re.escape(form)}(?![\w.])", "N", text)
    return text
