"""Correctness: compare a kernel's output with the float64 reference."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass
class Comparison:
    ok: bool
    max_abs_err: float
    max_rel_err: float
    detail: str = ""
    failing_indices: list[list[int]] = field(default_factory=list)
    output: str = ""  # the output compared
    worst_index: list[int] | None = None
    got: float | None = None
    want: float | None = None
    cause: str = ""  # wrong-values | unwritten | nan-inf | shape


def compare(name: str, got: np.ndarray, ref: np.ndarray, rtol: float, atol: float) -> Comparison:
    """|got - ref| <= atol + rtol*|ref| elementwise; NaN/Inf positions must match exactly."""
    ref = np.asarray(ref)
    if got.shape != ref.shape:
        return Comparison(False, float("inf"), float("inf"),
                          f"{name}: shape {got.shape}, reference {ref.shape}", output=name,
                          cause="shape")
    g = got.astype(np.float64)
    r = ref.astype(np.float64, copy=False)  # only read
    finite_r, finite_g = np.isfinite(r), np.isfinite(g)
    both = finite_r & finite_g
    special = not both.all()
    if special:
        same = (np.isnan(g) == np.isnan(r)) & (np.isposinf(g) == np.isposinf(r)) & \
               (np.isneginf(g) == np.isneginf(r))
        if not same.all():
            bad = np.argwhere(~same)
            n_nan = int(np.isnan(g[~same]).sum())
            first = bad[0].tolist()
            return Comparison(False, float("nan"), float("nan"),
                              f"{name}: {len(bad)} element(s) where NaN/Inf differ from the reference"
                              f" ({n_nan} NaN in the output: unwritten or invalid)",
                              bad[:5].tolist(), output=name, worst_index=first,
                              got=float(g[tuple(first)]), want=float(r[tuple(first)]),
                              cause="unwritten" if n_nan == len(bad) and np.isfinite(
                                  r[~same]).all() else "nan-inf")
    if not both.any():
        return Comparison(True, 0.0, 0.0)
    # the finite elements in order (no copies when all are finite); temporaries are
    # reused in place: outputs can be tens of millions of elements
    gb, rb = (g[both], r[both]) if special else (g.reshape(-1), r.reshape(-1))
    err = np.subtract(gb, rb)
    np.abs(err, out=err)
    mag = np.abs(rb)
    bound = rtol * mag
    bound += atol
    bad_mask = err > bound
    max_abs = float(err.max())
    rel = np.maximum(mag, np.finfo(np.float64).tiny, out=mag)
    max_rel = float(np.divide(err, rel, out=rel).max())
    if bad_mask.any():
        idx = np.argwhere(both)[bad_mask][:5].tolist()
        worst = np.argwhere(both)[int(np.argmax(err - bound))].tolist()
        return Comparison(False, max_abs, max_rel,
                          f"{name}: {int(bad_mask.sum())} of {both.sum()} elements outside tolerance"
                          f" (rtol={rtol:g}, atol={atol:g}); worst at {worst}: got "
                          f"{g[tuple(worst)]:.6g}, expected {r[tuple(worst)]:.6g}", idx,
                          output=name, worst_index=worst, got=float(g[tuple(worst)]),
                          want=float(r[tuple(worst)]), cause="wrong-values")
    return Comparison(True, max_abs, max_rel)
