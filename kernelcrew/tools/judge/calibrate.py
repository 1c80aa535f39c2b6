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
"""

from __future__ import annotations

import math
import re
from pathlib import Path

from kernelcrew.kernels.kernelfile import load_kernel
from kernelcrew.kernels.spec import Tolerance, load_op
from kernelcrew.tools.backends.backend import get_backend
from kernelcrew.tools.config import BenchSettings, Limits
from kernelcrew.tools.judge.harness import Harness

MARGIN = 4.0
NO_BOUND = 1.0e30  # the atol of the calibration run: every finite difference passes


def round_up(x: float) -> float:
    """x rounded up to one significant digit (2.3e-4 -> 3e-4)."""
    if x <= 0:
        return x
    e = math.floor(math.log10(x))
    return math.ceil(x / 10**e - 1e-9) * 10**e


def measured_atol(folder: Path, backend: str = "cpu") -> tuple[float, float] | None:
    """(the baseline's largest absolute error against the reference over every case, the
    atol that covers MARGIN times it), or None where the baseline cannot be run here or
    fails for another reason (NaN, a crash: `check` reports that)."""
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
    errs = [r.max_abs_err for r in run.rows if r.max_abs_err is not None]
    if not errs:
        return None
    worst = max(errs)
    return worst, round_up(MARGIN * worst)


def calibrate(folder: Path, backend: str = "cpu") -> str | None:
    """Raise op.yaml's atol to what the baseline's rounding needs (see the module text);
    a note saying what was measured and set, or None when nothing changed."""
    got = measured_atol(folder, backend)
    spec = load_op(folder)
    if got is None or got[1] <= spec.tolerance.atol:
        return None
    worst, atol = got
    path = folder / "op.yaml"
    text = path.read_text()
    line = re.search(r"^tolerance: \{rtol: ([^,]+), atol: [^}]+\}$", text, flags=re.MULTILINE)
    if line is None:
        return None
    new = (f"# atol measured at import: the baseline's float32 results differ from the "
           f"float64 reference by up to {worst:.2g}; atol is {MARGIN:g}x that\n"
           f"tolerance: {{rtol: {line.group(1)}, atol: {atol:.1e}}}")
    path.write_text(text[:line.start()] + new + text[line.end():])
    return (f"tolerance: atol raised from {spec.tolerance.atol:g} to {atol:.1e}: the "
            f"baseline's own float32 rounding reaches {worst:.2g} against the float64 "
            f"reference on these cases ({MARGIN:g}x that; edit op.yaml if your application "
            "needs more)")
