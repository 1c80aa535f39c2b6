"""Running the library's CUDA kernels under the CPU emulation (tests/cuda/emulate.py) on
every CUDA shape group, and what it covers of their source.

The emulation runs every thread of a launch as a fiber, so a case above EMU_ELEMENTS
elements (the op's cost-model bytes / 4) runs scaled down: the op's largest size is halved
(an odd size stays odd, a multiple of 4 stays one) until the case fits, except the
op's innermost size (the one a thread or a warp walks along: columns, the head dimension,
the time axis), which is halved only down to INNER_FLOOR, so a kernel's loops over a row
still run several trips and its vector path and its tails both run. The datacenter
`typical` and the `small` groups always run scaled down, and the unaligned cases above the
limit too; boundary cases run as they are.

Two things the full-size cases do that a scaled-down one cannot are run as variants of
the same code: a knob whose effect only shows at full size (a grid cap, GRID_CAP, that
makes the grid-stride loops go round several times; row chunks, RCHUNK or RY, that split
a column among several blocks) is set small and run on every case; and the
scalar fallbacks a kernel takes when a pointer is not 16-byte aligned run with every
array offset by one element (`misalign`). gcov counts, over all of these runs, which lines
and branches of the kernel file ran.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from kernelcrew.evals.peers import make_inputs, reference_outputs
from kernelcrew.kernels.kernelfile import parse_kernel_text
from kernelcrew.kernels.spec import LIBRARY, OpSpec, library_ops, load_op
from kernelcrew.tools.judge.verify import compare
from tests.cuda.emulate import LineCoverage, build, coverage, run
from tests.cuda.helpers import TEST_KERNELS

EMU_ELEMENTS = 1 << 15
# sizes halved only down to a floor: by default the op's last size (the one a thread or a
# warp walks along: columns, n) down to 2048; where the walk or the tiling is along other
# sizes, those (attention: keys in tiles of 32 and the head dimension; transpose and
# conv2d: whole tiles in both directions)
FLOORS = {"conv1d_causal": {"L": 2048}, "embedding": {"C": 2048},
          "attention": {"T": 128, "D": 64}, "transpose": {"rows": 64, "cols": 256},
          "conv2d": {"H": 32, "W": 64}}
# knobs whose full-size effect a scaled-down case does not show, set small in a variant: a
# grid capped at full size (grid-stride loops), several row chunks or strips per column
VARIANTS = {("gelu_tanh", "fast"): {"GRID_CAP": 3}, ("ddot", "fast"): {"GRID_CAP": 3},
            ("histogram", "fast"): {"GRID_CAP": 3}, ("colsum", "fast"): {"RCHUNK": 8},
            ("matvec_t", "fast"): {"RCHUNK": 8}, ("stencil5", "fast"): {"RY": 4}}
# cases outside the op's groups that reach a branch no group reaches (a vector loop's last
# odd step, a partial column tile on the vector path, D above the tiled path's limit, n = 0)
EXTRA = {"matvec": [{"m": 5, "n": 132}], "qmatvec": [{"m": 5, "n": 132}],
         "colsum": [{"rows": 9, "cols": 132}], "matvec_t": [{"m": 9, "n": 132}],
         "cumsum_rows": [{"rows": 3, "cols": 1100}], "ddot": [{"n": 0}],
         "attention": [{"B": 1, "T": 37, "D": 130}]}
# branches that may go one way only: guards a launch plan with exactly one block per row
# (or per group of matrices) never trips; they keep the kernel safe under other plans
GUARDS = ("if (r >= rows) return;", "if (i >= rows) return;", "if (row >= B * T) return;",
          "if (bt >= B * T) return;", "if (p0 >= batch) return;")
CUDA_OPS = [op for op in library_ops() if (LIBRARY / op / "baseline.cu").exists()]


def kernel_path(op: str, which: str) -> Path:
    return LIBRARY / op / "baseline.cu" if which == "baseline" else TEST_KERNELS / op / "fast.cu"


def scaled(spec: OpSpec, sizes: dict[str, int]) -> dict[str, int]:
    """The case as the emulation runs it (unchanged when small enough)."""
    sizes = dict(sizes)
    floors = FLOORS.get(spec.name, {spec.sizes[-1]: 2048})
    while spec.cost_bytes(sizes) // 4 > EMU_ELEMENTS:
        free = {k: v for k, v in sizes.items() if v > max(1, floors.get(k, 1))}
        if not free:
            break
        k = max(free, key=free.get)
        sizes[k] = _half(sizes[k])
    return sizes


def _half(v: int) -> int:
    """About v / 2, odd if v is odd, a multiple of 4 if v is one (alignment is kept)."""
    if v % 2:
        return max(1, (v // 2) | 1)
    h = v // 2
    return h + (4 - h % 4) % 4 if v % 4 == 0 and h >= 4 else h


@dataclass
class EmuRun:
    """What the emulated runs of one kernel file found."""

    failures: list[str] = field(default_factory=list)
    groups: set[str] = field(default_factory=set)
    cases: list[tuple[str, dict[str, int], dict[str, int]]] = field(default_factory=list)
    cov: LineCoverage = field(default_factory=LineCoverage)

    def unrun_lines(self) -> list[int]:
        return sorted(ln for ln, n in self.cov.lines.items() if n == 0)

    def one_way_branches(self, text: str) -> list[str]:
        """Lines with a branch never taken one way, other than the GUARDS."""
        src = text.splitlines()
        return [f"{ln}: {src[ln - 1].strip()}" for ln, b in sorted(self.cov.branches.items())
                if min(b) == 0 and src[ln - 1].strip() not in GUARDS]


def body_offset(text: str) -> int:
    """Lines before the kernel source proper (the front matter)."""
    return text[:text.index("*/")].count("\n") + 1


def emulate_kernel(op: str, which: str, work: Path) -> EmuRun:
    """Run one library kernel on every CUDA case (scaled where needed) and the op's EXTRA
    cases, aligned and misaligned, and its knob variant; compare with the float64
    reference; count the lines and branches that ran."""
    spec = load_op(op, "cuda")
    text = kernel_path(op, which).read_text()
    out = EmuRun()
    variants: list[tuple[str, str, bool]] = [("default", text, False), ("misaligned", text, True)]
    if (op, which) in VARIANTS:
        kf = parse_kernel_text(text, "cuda").with_changes(knobs=VARIANTS[(op, which)])
        variants.append((f"knobs {VARIANTS[(op, which)]}", kf.text, False))
    cases = [(c.group, c.sizes) for c in spec.cases()] + [("extra", e) for e in EXTRA.get(op, [])]
    for label, src, mis in variants:
        exe = build(src, spec, work, coverage=True, misalign=mis)
        for group, sizes in cases:
            small = scaled(spec, sizes)
            ins = make_inputs(spec, small, np.random.default_rng(11))
            got = run(exe, src, spec, small, ins, work)
            ref = reference_outputs(spec, small, ins)
            for name, want in ref.items():
                cmp = compare(name, got[name], want, spec.tolerance.rtol, spec.tolerance.atol)
                if not cmp.ok:
                    out.failures.append(f"{label} {group} {small}: {cmp}")
            out.groups.add(group)
            if label == "default":
                out.cases.append((group, sizes, small))
        # per line of the kernel body, so a variant with other front matter lines up
        out.cov.merge(coverage(exe), shift=body_offset(text) - body_offset(src))
    return out
