"""The `kernelcrew` command line. Exit codes: 0 ok, 1 rejected/failed, 2 bad input."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import Any

from kernelcrew.errors import InputError

JSON_OUT = False


def _progress(msg: str) -> None:
    if sys.stderr.isatty() or not JSON_OUT:
        print(f"  .. {msg}", file=sys.stderr, flush=True)


def _print_json(obj: Any) -> None:
    print(json.dumps(obj, indent=2, default=str))


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    def fmt(v: Any) -> str:
        if v is None:
            return "-"
        if isinstance(v, float):
            return f"{v:.4g}" if abs(v) < 1e4 else f"{v:.3e}"
        return str(v)

    cells = [[fmt(v) for v in r] for r in rows]
    widths = [max(len(h), *(len(r[i]) for r in cells)) if cells else len(h)
              for i, h in enumerate(headers)]
    line = "  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True))
    out = [line, "  ".join("-" * w for w in widths)]
    out += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in cells]
    return "\n".join(out)


def cmd_ops(args: argparse.Namespace) -> int:
    from kernelcrew.kernels.spec import library_ops, load_op

    specs = [load_op(n) for n in library_ops()]
    if args.json:
        _print_json([{"name": s.name, "family": s.family, "description": s.description,
                      "sizes": s.sizes, "groups": {g: len(v.cases) for g, v in s.shapes.items()},
                      "backends": sorted(s.baselines), "path": str(s.folder)} for s in specs])
    else:
        print(table(["op", "family", "sizes", "backends", "description"],
                    [[s.name, s.family, ",".join(s.sizes), ",".join(sorted(s.baselines)),
                      s.description] for s in specs]))
    return 0


def print_check(res: Any) -> None:
    rows = [[r.group, r.case, r.median_ms, r.p10_ms, r.p90_ms, r.baseline_ms, r.speedup,
             r.max_abs_err, r.status] for r in res.rows]
    print(table(["group", "case", "median_ms", "p10_ms", "p90_ms", "baseline_ms", "speedup",
                 "max_abs_err", "status"], rows))
    if res.compile and res.compile.resources:
        print()
        print(table(["kernel", "registers", "spill_st_B", "spill_ld_B", "smem_B"],
                    [[k.kernel, k.registers, k.spill_stores_bytes, k.spill_loads_bytes,
                      k.shared_bytes] for k in res.compile.resources]))
    print()
    sp = f"{res.speedup:.2f}x" if res.speedup else "n/a"
    print(f"verdict: {res.verdict}  correct: {res.correct}  speedup: {sp}  ({res.reason})")
    print(f"sandbox: {res.sandbox}")


def cmd_check(args: argparse.Namespace) -> int:
    from kernelcrew.tools.check import check
    from kernelcrew.tools.config import BenchSettings, Limits

    bench = BenchSettings(**({"reps": args.reps} if args.reps else {}))
    limits = Limits(**({"timeout_s": args.timeout} if args.timeout else {}))
    res = check(args.op, args.kernel, args.backend, seed=args.seed, limits=limits, bench=bench,
                progress=None if args.json else _progress)
    if args.json:
        _print_json(res.model_dump(mode="json"))
    else:
        print_check(res)
    return 1 if res.verdict == "rejected" else 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="kernelcrew", description=__doc__)
    sub = p.add_subparsers(dest="cmd", required=True)

    s = sub.add_parser("ops", help="list the library operators")
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=cmd_ops)

    s = sub.add_parser("check", help="verify a kernel file and time it against the baseline")
    s.add_argument("op", help="library name or operator folder")
    s.add_argument("kernel", help="kernel file (.cpp for cpu, .cu for cuda)")
    s.add_argument("--backend", default=None, choices=["cpu", "cuda"],
                   help="default: from the kernel file's suffix")
    s.add_argument("--json", action="store_true")
    s.add_argument("--reps", type=int, help="timed runs per case (default 20)")
    s.add_argument("--timeout", type=float, help="seconds per worker (default 30)")
    s.add_argument("--seed", type=int, help="input seed (default: fresh each check)")
    s.set_defaults(func=cmd_check)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    global JSON_OUT
    parser = build_parser()
    args = parser.parse_args(argv)
    JSON_OUT = bool(getattr(args, "json", False))
    if getattr(args, "cmd", None) == "check" and args.backend is None:
        args.backend = "cuda" if str(args.kernel).endswith((".cu", ".cuh")) else "cpu"
    try:
        return args.func(args)
    except InputError as e:
        print(f"kernelcrew: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("kernelcrew: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
