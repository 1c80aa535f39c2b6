"""Time one operator's kernels side by side: the baseline, the compiler alone, a crew run's
best and any other kernel files, in one harness and alternating rounds.

For an operator folder that is not in the library (one made by `kernelcrew import`, say),
this is part 6 of `make bench` for that folder: every kernel is verified on every shape
group first, then the correct ones are timed on the typical cases, round after round in a
rotating order, so their ratios come from the same minutes of the same machine.

    .venv/bin/python scripts/side_by_side.py OP_DIR [--run RUN_DIR ...] \
        [--kernel LABEL=FILE ...] [--reps 20] [--rounds 4] [--json]

`--run` takes a run directory of `kernelcrew optimize` (its `best.cpp`, labelled by the
folder's name); the compiler alone is the baseline's own source at -O3 -march=native, plus
-fopenmp where it has OpenMP pragmas. Times are the sums of the typical cases' medians.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from kernelcrew.evals.peers.side_by_side import compiler_alone, time_side_by_side
from kernelcrew.kernels.kernelfile import load_kernel
from kernelcrew.kernels.spec import load_op


def kernels_of(args: argparse.Namespace) -> dict:
    spec = load_op(args.op)
    base = load_kernel(spec.baseline_path("cpu"))
    kernels = {"baseline": base, "compiler alone": compiler_alone(base)}
    for run in args.run:
        best = Path(run) / "best.cpp"
        if not best.exists():
            raise SystemExit(f"side_by_side: {best}: no best kernel in that run directory; "
                             "give a run directory of `kernelcrew optimize`")
        kernels[Path(run).name] = load_kernel(best)
    for item in args.kernel:
        label, sep, path = item.partition("=")
        if not sep or not Path(path).exists():
            raise SystemExit(f"side_by_side: --kernel {item}: expected LABEL=FILE with an "
                             "existing kernel file")
        kernels[label] = load_kernel(path)
    return kernels


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("op", help="a library operator or an operator folder")
    ap.add_argument("--run", action="append", default=[], help="a crew run directory")
    ap.add_argument("--kernel", action="append", default=[], help="LABEL=FILE")
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    timed = time_side_by_side(args.op, kernels_of(args), reps=args.reps, rounds=args.rounds)
    base = timed["baseline"].typical_ms
    alone = timed["compiler alone"].typical_ms
    rows = []
    for label, t in timed.items():
        ms = t.typical_ms
        rows.append({"kernel": label, "correct": t.correct, "typical_ms": ms,
                     "over_baseline": base / ms if ms and base else None,
                     "over_compiler_alone": alone / ms if ms and alone else None,
                     "error": t.error})
    if args.json:
        print(json.dumps(rows))
        return 0
    print("| kernel | correct | typical ms | over baseline | over compiler alone |")
    print("|---|---|---|---|---|")
    for r in rows:
        def x(v: float | None) -> str:
            return f"{v:.2f}x" if v else "-"
        ms = f"{r['typical_ms']:.4g}" if r["typical_ms"] else "-"
        print(f"| {r['kernel']} | {'yes' if r['correct'] else 'no: ' + r['error'][:80]} | "
              f"{ms} | {x(r['over_baseline'])} | {x(r['over_compiler_alone'])} |")
    return 0 if all(r["correct"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
