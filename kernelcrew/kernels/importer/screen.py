"""Generated cases the function's own code does not survive are left out at import.

The boundary and unaligned cases are made up by the importer (groups.py), and code from a
code base often handles only some sizes: a blocked stencil that steps in whole 16x16
tiles writes past its arrays when the grid is 511 wide, a codec's routine asserts its
frame length. Such a case is not a test of a candidate, it is a case the original never
had. So before op.yaml is written, the float64 build of the function (reference64.cpp, in
its own child process) runs every generated case on inputs drawn as `check` draws them;
a case it dies on, hangs on or exits from is left out, with a note saying which and why.

The screen is conclusive only when the user's own typical cases survive the same inputs:
where one dies too (an index input drawn without `--values`), the inputs are at fault,
not the sizes, and nothing is dropped (`check` then names the failing case as before).
A typical case is never dropped.
"""

from __future__ import annotations

import numpy as np

from kernelcrew.kernels.derived import DerivedReference, ReferenceDied
from kernelcrew.kernels.expr import evaluate
from kernelcrew.kernels.spec import INT_INPUTS


def _inputs(ref: DerivedReference, case: dict[str, int], scalars: dict[str, float],
            ranges: dict[str, tuple[str, list[str], str, str]], seed: int) -> dict:
    rng = np.random.default_rng(seed)
    kw: dict = dict(case)
    kw.update(scalars)
    for name, kind, dtype, shape in ref.args:
        if kind != "input":
            continue
        dims = tuple(int(evaluate(d, case)) for d in shape)
        if dtype.startswith("float"):
            kw[name] = rng.standard_normal(dims)
        else:
            lo, hi = INT_INPUTS.get(dtype, (-8, 9))  # as the judge draws them
            if name in ranges:
                lo, hi = (int(evaluate(ranges[name][2], case)),
                          int(evaluate(ranges[name][3], case)))
            kw[name] = rng.integers(lo, max(hi, lo + 1), size=dims)
    return kw


def _label(case: dict[str, int]) -> str:
    return ",".join(f"{k}={v}" for k, v in case.items())


def screen_generated(ref: DerivedReference, groups: dict[str, list[dict[str, int]]],
                     scalars: dict[str, float],
                     ranges: dict[str, tuple[str, list[str], str, str]]) -> list[str]:
    """Drop from `groups` (in place) the generated cases the reference dies on; a note for
    each. Nothing is dropped when a typical case dies too (see the module text)."""
    died: list[tuple[str, dict[str, int], ReferenceDied]] = []
    for g, cases in groups.items():
        if g == "typical":
            continue
        for i, c in enumerate(cases):
            try:
                ref(**_inputs(ref, c, scalars, ranges, seed=i))
            except ReferenceDied as e:
                died.append((g, c, e))
    if not died:
        return []
    for i, c in enumerate(groups.get("typical", [])):
        try:
            ref(**_inputs(ref, c, scalars, ranges, seed=i))
        except ReferenceDied:
            return []  # the inputs are at fault, not the sizes
    notes = []
    for g, c, e in died:
        groups[g] = [x for x in groups[g] if x != c]
        notes.append(f"generated {g} case {_label(c)} left out: the function's own code "
                     f"(its float64 build) {e.what} on it, so these sizes are outside what "
                     "it handles")
    return notes
