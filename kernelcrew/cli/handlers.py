"""One function per subcommand: `cmd_<name>(args) -> exit code`. Each imports what it needs
when it runs, so `kernelcrew ops` does not load LangGraph, Chroma or Ray.

Exit codes: 0 ok, 1 the kernel was rejected or the run failed, 2 bad input (an InputError
raised here is turned into one line and 2 by `main`)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from kernelcrew.cli.options import (
    bench_from_args,
    comma_list,
    context_from_args,
    kernel_backend,
    limits_from_args,
    optional_path,
    replay_overrides,
)
from kernelcrew.cli.printing import (
    live,
    print_check,
    print_json,
    print_profile,
    print_reflections,
    print_result,
    print_runs,
    progress,
    table,
)
from kernelcrew.errors import InputError

# ---------------------------------------------------------------- operators and kernels


def cmd_ops(args: argparse.Namespace) -> int:
    from kernelcrew.kernels.spec import library_ops, load_op

    specs = [load_op(n) for n in library_ops()]
    if args.json:
        print_json([{"name": s.name, "family": s.family, "description": s.description,
                     "sizes": s.sizes, "groups": {g: len(v.cases) for g, v in s.shapes.items()},
                     "backends": sorted(s.baselines), "path": str(s.folder)} for s in specs])
    else:
        print(table(["op", "family", "sizes", "backends", "description"],
                    [[s.name, s.family, ",".join(s.sizes), ",".join(sorted(s.baselines)),
                      s.description] for s in specs]))
    return 0


def cmd_check(args: argparse.Namespace) -> int:
    from kernelcrew.kernels.spec import load_op
    from kernelcrew.tools.judge.check import check

    backend = kernel_backend(args)
    # the backend's own shape groups (op.yaml `backend_shapes`, e.g. a GPU's larger cases)
    spec = load_op(args.op, backend)
    res = check(spec, args.kernel, backend, seed=args.seed,
                limits=limits_from_args(args), bench=bench_from_args(args),
                progress=None if args.json else progress)
    static = _static_evidence(spec, args.kernel, res)
    if args.json:
        print_json({**res.model_dump(mode="json"), **({"static": static} if static else {})})
    else:
        print_check(res)
        if static:
            print(f"static evidence ({static['arch']}): {static['text']}")
    return 1 if res.verdict == "rejected" else 0


def _static_evidence(spec: Any, kernel: str, res: Any) -> dict | None:
    """What the compiler says of a kernel that compiled but could not run (no device):
    ptxas registers and spills, the occupancy of its launch on the first typical case,
    SASS counts; None when it ran or did not compile."""
    if res.ran or not (res.compile and res.compile.ok):
        return None
    from kernelcrew.kernels.kernelfile import load_kernel
    from kernelcrew.tools.backends.backend import get_backend
    from kernelcrew.tools.observe.static import static_evidence

    return static_evidence(spec, load_kernel(kernel), res.compile, get_backend(res.backend))


def cmd_profile(args: argparse.Namespace) -> int:
    from kernelcrew.tools.observe.profile import ProfileFailed, profile

    try:
        res = profile(args.op, args.kernel, kernel_backend(args), case=args.case,
                      bench=bench_from_args(args), limits=limits_from_args(args),
                      threads=args.threads, progress=None if args.json else progress)
    except ProfileFailed as e:  # the kernel fails, as a rejected check does: exit 1
        print(f"kernelcrew: profile failed: {e}", file=sys.stderr)
        return 1
    if args.json:
        print_json(res.model_dump(mode="json"))
    else:
        print_profile(res)
    return 0


# ---------------------------------------------------------------- the crew


def require_executor(kind: str) -> None:
    from kernelcrew.tools.executor import require

    require(kind)  # one line and exit 2 when, e.g., Ray is not installed


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


def _preflight_llm(ctx: Any) -> None:
    """Where any role is an LLM: one line and exit 1 when nothing listens at the endpoint,
    exit 2 for a cost budget without prices."""
    roles = ("specialists", "coordinator", "reflector", *(ctx.specialists or []))
    if not any(ctx.policy_for(r) == "llm" for r in roles):
        return
    from kernelcrew.agents.llm import preflight

    s = preflight(ctx.llm)
    if ctx.cost_budget is not None and s.price_input is None and s.price_output is None:
        raise InputError("--cost-budget needs prices: pass --price-in and --price-out "
                         "($ per 1M tokens) or set KERNELCREW_LLM_PRICE_IN/_OUT",
                         field="cost_budget")


def _run_crew(args: argparse.Namespace) -> dict:
    """A new run, a resumed one, or a replayed one; the result as `runner` returns it."""
    from kernelcrew.graph import runner

    approver = runner.ask_on_terminal if args.approve else None
    if args.resume:
        overrides = {k: getattr(args, k) for k in ("executor", "ray_address") if getattr(args, k)}
        return runner.resume(args.resume, progress=live, approver=approver,
                             overrides=overrides)
    if args.replay:
        return runner.replay(args.replay, live=args.replay_missing == "live",
                             overrides=replay_overrides(args), progress=live,
                             approver=approver)
    if not args.op:
        raise InputError("give an operator (library name or folder), or --resume RUN_ID")
    ctx = context_from_args(args)
    _check_run_memory(ctx)
    _preflight_llm(ctx)
    return runner.optimize(args.op, ctx, progress=live, approver=approver)


def cmd_optimize(args: argparse.Namespace) -> int:
    if args.approve and not sys.stdin.isatty():
        raise InputError("--approve asks on the terminal; run it interactively")
    if args.executor:
        require_executor(args.executor)
    result = _run_crew(args)
    if args.json:
        print_json(result)
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


def cmd_eval(args: argparse.Namespace) -> int:
    from kernelcrew.evals.suite import (
        TABLE_HEADERS,
        EvalSettings,
        run_suite,
        summary_line,
        table_cells,
    )
    from kernelcrew.kernels.spec import library_ops

    require_executor(args.executor)
    settings = EvalSettings(ops=comma_list(args.ops) or library_ops(), backend=args.backend,
                            agents=args.agents, budget=args.budget, memory=args.memory,
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
        print_json(res.to_json())
    else:
        print(table(TABLE_HEADERS, [table_cells(r) for r in res.rows]))
        print()
        print(summary_line(res.summary))
        print(f"runs: {res.settings['runs_dir']}  machine: {res.machine.get('cpu')}, "
              f"{res.machine.get('cores')} cores, {res.machine.get('compiler')}")
    return 0 if all(r.correct and not r.error for r in res.rows) else 1


# ---------------------------------------------------------------- runs read back


def cmd_runs(args: argparse.Namespace) -> int:
    from kernelcrew.graph.context import runs_root
    from kernelcrew.report.timeline import list_runs

    root = args.runs_dir or runs_root()
    runs = list_runs(root, limit=args.limit)
    if args.json:
        print_json(runs)
    elif not runs:
        print(f"no runs under {root}")
    else:
        print_runs(runs)
    return 0


def cmd_show(args: argparse.Namespace) -> int:
    from kernelcrew.report.timeline import find_run_dir, load_run, render_text, timeline_json

    run = load_run(find_run_dir(args.run, args.runs_dir))
    if args.json:
        print_json(timeline_json(run))
    else:
        print(render_text(run))
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    from kernelcrew.report.timeline import find_run_dir
    from kernelcrew.report.write import write_reports

    md, html = write_reports(find_run_dir(args.run, args.runs_dir))
    if args.json:
        print_json({"markdown": str(md), "html": str(html)})
    else:
        print(md)
        print(html)
    return 0


# ---------------------------------------------------------------- memory


def _open_memory(args: argparse.Namespace) -> Any:
    from kernelcrew.memory.store import MemoryConfigError, MemoryStore, MemoryUnavailable

    try:
        return MemoryStore.open(path=None if args.memory_url else args.memory_dir,
                                url=args.memory_url, embedding=args.memory_embedding)
    except MemoryConfigError as e:
        raise InputError(str(e)) from None
    except MemoryUnavailable as e:
        raise InputError(f"memory store unavailable: {e}") from None


def cmd_memory(args: argparse.Namespace) -> int:
    store = _open_memory(args)
    if args.action == "export":
        text = store.export_markdown()
        if args.out:
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
    print_reflections(items, args.json)
    return 0


# ---------------------------------------------------------------- your own code in and out


def cmd_import(args: argparse.Namespace) -> int:
    """`kernelcrew import` (its flags: `parser.add_import`)."""
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
        inputs=comma_list(args.inputs), outputs=comma_list(args.outputs),
        scalars=parse_assignments(args.scalar or [], "--scalar"),
        defines=parse_defines(args.define or []),
        include_dirs=[Path(d) for d in args.include_dir or []],
        compile_commands=optional_path(args.compile_commands),
        flags=args.flags.split() if args.flags else None,
        out=optional_path(args.out), name=args.name,
        reference=optional_path(args.reference),
        values=parse_assignments(args.values or [], "--values"),
        family=args.family or "imported", force=args.force, grid=args.grid or [],
        block=args.block or [], shared_bytes=args.shared_bytes, nvcc=nvcc_path())
    res = import_function(req)
    if res.baseline.endswith(".cpp"):  # the baseline's own rounding sets the atol it needs
        from kernelcrew.tools.judge.calibrate import calibrate

        said = calibrate(res.folder)
        if said:
            (res.warnings if said[0] == "warning" else res.notes).append(said[1])
    if args.json:
        print_json({"folder": str(res.folder), "op": res.op_name, "entry": res.entry,
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


def _kernel_to_export(args: argparse.Namespace, run_dir: Path) -> tuple[dict, Path]:
    """The run's context and the kernel file `export` hands back (the best, or --kernel)."""
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
    return ctx, best


def cmd_export(args: argparse.Namespace) -> int:
    from kernelcrew.kernels.importer.patch import make_patch
    from kernelcrew.kernels.spec import load_op
    from kernelcrew.report.timeline import find_run_dir

    if not args.patch:
        raise InputError("say what to export: --patch (a diff against the imported file)")
    run_dir = Path(find_run_dir(args.run, args.runs_dir))
    ctx, best = _kernel_to_export(args, run_dir)
    spec = load_op(ctx["operator"])
    res = make_patch(spec, best.read_text(), (run_dir / f"baseline{best.suffix}").read_text())
    out = Path(args.out) if args.out else run_dir / f"{spec.origin.function}.patch"
    if not res.patch:
        msg = ("the kernel's code is the baseline's: nothing to patch" +
               (f"; compile with: {' '.join(res.flags)} (new: {' '.join(res.added_flags)})"
                if res.added_flags else ""))
        if args.json:
            print_json({"patch": None, "reason": msg, "flags": res.flags,
                        "added_flags": res.added_flags})
        else:
            print(msg)
        return 0
    if args.out == "-":
        sys.stdout.write(res.patch)
        return 0
    out.write_text(res.patch)
    if args.json:
        print_json({"patch": str(out), "root": str(res.root), "file": res.relpath,
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
    from kernelcrew.kernels.importer.scaffold import scaffold

    folder = scaffold(args.name, optional_path(args.dir), force=args.force)
    print(f"wrote {folder}: op.yaml, reference.py, baseline.cpp, inputs.py (a working "
          f"y = 2 * x to replace)")
    print(f"next: kernelcrew check {folder} {folder}/baseline.cpp")
    return 0
