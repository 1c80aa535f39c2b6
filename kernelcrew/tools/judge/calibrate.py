"""An imported op's tolerance, set from the baseline's own rounding (`kernelcrew import`).

A float32 function checked against its float64 build differs by its rounding, and a
reduction's rounding grows with its length: llama2.c's `matmul` at n = 4096 misses
atol 1e-4 by 2e-5 on 2 of 4096 outputs, its `rmsnorm` over 1M elements on a third of them
(the sum of squares, one float accumulator, is off by 2e-4 of itself). Such a baseline
fails its own check, and the user learns the tolerance is wrong only then. So `import`
runs the baseline once on every case, in a sandboxed worker as `check` does, with no
absolute bound, reads the largest absolute error, and where MARGIN times it is more than
the generated atol, raises atol to it (one significant digit, rounded up) and says so
in `op.yaml`. A candidate is then held to a few times the rounding the original code
itself has on these inputs; rtol is left as generated.

Rounding is small next to the results: a float32 sum of a million terms is off by about
1e-4 of itself. A difference of more than SCALE_LIMIT of the largest reference value on
its case is not rounding: the function is unstable on the inputs drawn (an LU
factorization without pivoting on random matrices differs by 90% of its largest value),
and an atol that covered it would pass any output at all. Then atol stays as generated,
op.yaml says why, and `check` fails the baseline until the inputs are made right
(inputs.py) or the tolerance is set by hand.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from kernelcrew.kernels.kernelfile import load_kernel
from kernelcrew.kernels.spec import Tolerance, load_op
from kernelcrew.tools.backends.backend import get_backend
from kernelcrew.tools.config import BenchSettings, Limits
from kernelcrew.tools.judge.harness import Harness

MARGIN = 4.0
NO_BOUND = 1.0e30  # the atol of the calibration run: every finite difference passes
SCALE_LIMIT = 1.0e-3  # the largest error, as a share of its case's largest value, that
# is still taken for rounding


@dataclass
class Measured:
    worst: float  # the largest absolute error over every case
    atol: float  # the atol that covers MARGIN times it
    share: float  # the largest error on a case over that case's largest |reference| value
    case: str  # the case of that share


def round_up(x: float) -> float:
    """x rounded up to one significant digit (2.3e-4 -> 3e-4)."""
    if x <= 0:
        return x
    e = math.floor(math.log10(x))
    return math.ceil(x / 10**e - 1e-9) * 10**e


def measured_atol(folder: Path, backend: str = "cpu") -> Measured | None:
    """What the baseline's results differ from the reference by, over every case, or None
    where the baseline cannot be run here or fails for another reason (NaN, a crash:
    `check` reports that)."""
    spec = load_op(folder)
    be = get_backend(backend)
    if not be.can_run()[0]:
        return None
    kf = load_kernel(spec.baseline_path(be.name))
    comp = be.compile(kf, spec)
    if not comp.ok:
        return None
    lax = spec.model_copy(update={"tolerance": Tolerance(rtol=spec.tolerance.rtol,
                                                          atol=NO_BOUND)})
    with Harness(lax, be, seed=0, limits=Limits(), bench=BenchSettings(input_sets=1)) as h:
        run = h.run(comp, kf, mode="verify", reps=0)
        if not run.correct:
            return None
        by_case = {r.case: r.max_abs_err for r in run.rows if r.max_abs_err is not None}
        share, where = 0.0, ""
        for case in h.cases:
            err = by_case.get(case.label)
            if not err:
                continue
            top = _largest(h.data(case).references)
            # an error where every reference value is 0 is not rounding either
            got = err / top if top > 0 else math.inf
            if got > share:
                share, where = got, case.label
    if not by_case:
        return None
    worst = max(by_case.values())
    return Measured(worst, round_up(MARGIN * worst), share, where)


def _largest(refs: list[dict[str, np.ndarray]]) -> float:
    """The largest finite |value| of the reference outputs (0 where there is none)."""
    top = 0.0
    for outs in refs:
        for a in outs.values():
            fin = np.abs(a[np.isfinite(a)])
            if fin.size:
                top = max(top, float(fin.max()))
    return top


def calibrate(folder: Path, backend: str = "cpu") -> tuple[str, str] | None:
    """Raise op.yaml's atol to what the baseline's rounding needs (see the module text).
    ("note", what was measured and set) or ("warning", why atol was left as it was);
    None when nothing needed saying."""
    got = measured_atol(folder, backend)
    spec = load_op(folder)
    if got is None or got.atol <= spec.tolerance.atol:
        return None
    path = folder / "op.yaml"
    text = path.read_text()
    line = re.search(r"^tolerance: \{rtol: ([^,]+), atol: [^}]+\}$", text, flags=re.MULTILINE)
    if line is None:
        return None
    if got.share > SCALE_LIMIT:
        share = f"{got.share:.0%} of the largest value" if math.isfinite(got.share) else \
            "where every reference value is 0"
        why = (f"the baseline's float32 results differ from the float64 reference by up to "
               f"{got.worst:.2g}, {share} on {got.case}: not rounding, the function is "
               "unstable on the inputs drawn")
        path.write_text(text[:line.start()] + f"# atol NOT raised at import: {why}\n"
                        + text[line.start():])
        return "warning", (
            f"tolerance: atol left at {spec.tolerance.atol:g}: {why}, and an atol that "
            "covered it would pass any output. Give inputs the function is meant for "
            "(inputs.py: make_inputs, e.g. a diagonally dominant matrix for a "
            "factorization without pivoting) or set the tolerance by hand; until then "
            "`check` fails the baseline")
    new = (f"# atol measured at import: the baseline's float32 results differ from the "
           f"float64 reference by up to {got.worst:.2g}; atol is {MARGIN:g}x that\n"
           f"tolerance: {{rtol: {line.group(1)}, atol: {got.atol:.1e}}}")
    path.write_text(text[:line.start()] + new + text[line.end():])
    return "note", (
        f"tolerance: atol raised from {spec.tolerance.atol:g} to {got.atol:.1e}: the "
        f"baseline's own float32 rounding reaches {got.worst:.2g} against the float64 "
        f"reference on these cases ({MARGIN:g}x that; edit op.yaml if your application "
        "needs more)")
