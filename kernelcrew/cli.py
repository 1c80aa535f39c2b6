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
    if sys.stderr.isatty():
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


def _live(event: dict) -> None:
    """One line per node execution, on a terminal."""
    if not sys.stderr.isatty():
        return
    who = f" {event['agent']}" if event.get("agent") else ""
    print(f"  [iter {event.get('iteration', 0)}] {event['node']}{who} "
          f"({event.get('duration_s', 0):.1f}s): {event.get('summary', '')[:140]}",
          file=sys.stderr, flush=True)


def print_result(result: dict) -> None:
    rows = result.get("table", [])
    print(table(["group", "case", "baseline_ms", "best_ms", "speedup", "max_abs_err", "status"],
                [[r["group"], r["case"], r.get("baseline_ms"), r.get("median_ms"),
                  r.get("speedup"), r.get("max_abs_err"), r["status"]] for r in rows]))
    best = result.get("best", {})
    print()
    print(f"{result.get('op')} on {result.get('backend')}: best {best.get('speedup', 0):.2f}x over "
          f"the baseline ({best.get('verdict_vs_baseline')}), correct: {best.get('correct')}")
    print(f"  best kernel: {best.get('path')}  (by {best.get('author')}, {best.get('kind')}, "
          f"iteration {best.get('iteration')})")
    print(f"  iterations: {result.get('iterations')}, evaluations: {result.get('evaluations')}, "
          f"stop: {result.get('stop_reason')}")
    run_dir = result.get("run_dir", "")
    print(f"  run: {result.get('run_id')}  report: {run_dir}/report.md")


def _context_from_args(args: argparse.Namespace) -> Any:
    from kernelcrew.graph.context import RunContext

    ctx = RunContext()
    for name in ("backend", "agents", "max_iters", "patience", "reps", "seed", "memory_dir",
                 "memory_url", "approve", "candidates_per_iter"):
        v = getattr(args, name, None)
        if v is not None and v is not False:
            setattr(ctx, name, v)
    if args.timeout:
        ctx.timeout_s = args.timeout
    if args.budget_s:
        ctx.wall_budget_s = args.budget_s
    if args.no_memory:
        ctx.use_memory = False
    if args.specialists:
        ctx.specialists = [s.strip() for s in args.specialists.split(",") if s.strip()]
    if args.run_dir:
        ctx.run_dir = str(args.run_dir)
    ctx.llm = llm_settings(args)
    return ctx


def llm_settings(args: argparse.Namespace) -> dict:
    """LLM options from flags, falling back to the environment (see README)."""
    import os

    out = {
        "model": getattr(args, "model", None) or os.environ.get("KERNELCREW_LLM_MODEL"),
        "base_url": getattr(args, "base_url", None) or os.environ.get("OPENAI_BASE_URL"),
        "temperature": getattr(args, "temperature", None),
        "timeout": getattr(args, "llm_timeout", None),
        "structured_output": getattr(args, "structured_output", None),
    }
    return {k: v for k, v in out.items() if v is not None}


def cmd_optimize(args: argparse.Namespace) -> int:
    from kernelcrew.graph import runner

    approver = runner.ask_on_terminal if args.approve else None
    if args.approve and not sys.stdin.isatty():
        raise InputError("--approve asks on the terminal; run it interactively")
    if args.resume:
        result = runner.resume(args.resume, progress=_live, approver=approver)
    else:
        if not args.op:
            raise InputError("give an operator (library name or folder), or --resume RUN_ID")
        result = runner.optimize(args.op, _context_from_args(args), progress=_live,
                                 approver=approver)
    if args.json:
        _print_json(result)
    else:
        print_result(result)
    best = result.get("best", {})
    return 0 if best.get("correct") else 1


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

    s = sub.add_parser("optimize", help="run the crew on an operator")
    s.add_argument("op", nargs="?", help="library name or operator folder")
    s.add_argument("--backend", default="auto", choices=["auto", "cpu", "cuda"])
    s.add_argument("--agents", default="heuristic",
                   help="heuristic | llm | per role, e.g. coordinator=heuristic,specialists=llm")
    s.add_argument("--specialists", help="comma-separated specialist names (default: all)")
    s.add_argument("--max-iters", type=int, default=None)
    s.add_argument("--patience", type=int, default=None)
    s.add_argument("--budget-s", type=float, default=None, help="wall-clock budget in seconds")
    s.add_argument("--candidates-per-iter", type=int, default=None)
    s.add_argument("--run-dir", help="where to keep this run (default: the runs folder)")
    s.add_argument("--resume", metavar="RUN_ID", help="continue a run that was stopped")
    s.add_argument("--approve", action="store_true", help="ask before accepting a candidate")
    s.add_argument("--memory-dir", help="local memory store (default: user data dir)")
    s.add_argument("--memory-url", help="shared Chroma server, e.g. http://host:8000")
    s.add_argument("--no-memory", action="store_true", help="neither read nor write reflections")
    s.add_argument("--reps", type=int, help="timed runs per case (default 20)")
    s.add_argument("--timeout", type=float, help="seconds per worker (default 30)")
    s.add_argument("--seed", type=int)
    s.add_argument("--model", help="LLM model (env KERNELCREW_LLM_MODEL)")
    s.add_argument("--base-url", help="OpenAI-compatible endpoint (env OPENAI_BASE_URL)")
    s.add_argument("--temperature", type=float)
    s.add_argument("--llm-timeout", type=float, help="seconds per LLM request")
    s.add_argument("--structured-output", choices=["json_schema", "function_calling", "json_mode"])
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=cmd_optimize)
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
