"""baseline: create the run directory, compile and measure the operator's baseline."""

from __future__ import annotations

import secrets
import shutil
import time
from datetime import datetime
from pathlib import Path

from langgraph.runtime import Runtime

from kernelcrew.errors import InputError
from kernelcrew.graph.context import RunContext, runs_root
from kernelcrew.graph.nodes.common import ctx_of, kernel_suffix
from kernelcrew.graph.nodes.write import missing_baseline, write_baseline
from kernelcrew.graph.services import tools_for
from kernelcrew.graph.state import CrewState
from kernelcrew.kernels.kernelfile import load_kernel, validate_against
from kernelcrew.kernels.spec import load_op
from kernelcrew.tools.backends.backend import get_backend
from kernelcrew.tools.judge.harness import case_key
from kernelcrew.tools.locks import bench_lock
from kernelcrew.trace import emit, write_json_atomic


def new_run_id(op_name: str) -> str:
    return f"{datetime.now().strftime('%Y%m%d-%H%M%S')}-{op_name}-{secrets.token_hex(2)}"


def baseline(state: CrewState, runtime: Runtime[RunContext]) -> dict:
    t0 = time.monotonic()
    ctx = ctx_of(runtime)
    backend = get_backend(ctx.backend)
    spec = load_op(state["operator"], backend.name)  # the groups this backend runs
    written = backend.name not in spec.baselines
    if written and ctx.policy_for("writer") != "llm":
        raise missing_baseline(spec, backend.name)
    run_id = state.get("run_id") or new_run_id(spec.name)
    run_dir = Path(ctx.run_dir) if ctx.run_dir else Path(ctx.runs_dir or runs_root()) / run_id
    (run_dir / "candidates").mkdir(parents=True, exist_ok=True)
    write_json_atomic(run_dir / "context.json", {**ctx.to_dict(), "run_id": run_id,
                                                 "operator": str(spec.folder),
                                                 "backend": backend.name,
                                                 "requested_backend": ctx.backend})
    suffix = kernel_suffix(backend.name)
    partial = {"run_dir": str(run_dir), "op_path": str(spec.folder), "backend": backend.name,
               "seed": ctx.seed if ctx.seed is not None else secrets.randbits(31)}
    tools = tools_for(partial, ctx)
    # no baseline: the LLM writer's first correct kernel is the baseline
    base_src = write_baseline(spec, ctx, run_dir, tools) if written \
        else spec.baseline_path(backend.name)
    base_copy = run_dir / f"baseline{suffix}"
    shutil.copyfile(base_src, base_copy)
    shutil.copyfile(base_src, run_dir / f"best{suffix}")
    kf = load_kernel(base_copy)
    validate_against(kf, spec)
    comp = tools.compile(kf)
    if not comp.ok:
        raise InputError(f"the baseline does not compile: {comp.reason}", path=base_src)
    runnable, why = backend.can_run()
    medians: dict[str, float] = {}
    compile_only = ""
    sandbox = ""
    if runnable:
        with bench_lock():  # crews running at once (eval on a cluster) time one at a time
            run = tools.harness.run(comp, kf)
        if not run.correct:
            raise InputError(f"the baseline is not correct: {run.first_failure()}", path=base_src)
        medians = {case_key(c): r.median_ms for c, r in zip(tools.harness.cases, run.rows,
                                                             strict=True)}
        sandbox = run.outcome.sandbox
    elif backend.name == "cuda":
        # no device: the crew still proposes and compiles; nothing is run or timed
        compile_only = why
    else:
        raise InputError(f"cannot optimize on {backend.name} here: {why}; use --backend cpu")
    total = sum(v for k, v in medians.items() if k.startswith("typical"))
    summary = (f"baseline of {spec.name} on {backend.describe()}: typical total {total:.3f} ms"
               if not compile_only else
               f"baseline of {spec.name} compiled, not run ({compile_only}): candidates will "
               "be compiled and described from ptxas and SASS only")
    emit(run_dir, "baseline", summary, t0=t0, refs={"kernel": str(base_copy)},
         sandbox=sandbox, device=backend.describe(), medians=medians,
         compile_only=compile_only)
    best = {"path": str(run_dir / f"best{suffix}"), "source": str(base_copy),
            "digest": kf.digest(), "speedup": 1.0, "iteration": 0, "author": "baseline",
            "kind": "baseline"}
    reference_ms: dict[str, float] = {}
    if written and not compile_only:  # the user's only other implementation: time it here too
        with bench_lock():
            reference_ms = tools.harness.time_reference(ctx.reps)
    return {**partial, "run_id": run_id, "op_name": spec.name, "family": spec.family,
            "started": time.time(), "iteration": 1, "baseline": {
                "path": str(base_copy), "medians": medians,
                "typical_ms": None if compile_only else total,
                "written": written, "reference_ms": reference_ms},
            "best": best, "since_improvement": 0, "compile_failures": 0, "plan_first": False,
            "proposals": [], "evaluations": [],
            **({"compile_only": compile_only} if compile_only else {})}
