"""Per-process tools of a run (spec, backend, harness, executor), rebuilt on resume.

The harness holds the inputs and float64 references of the run's seed; it cannot
live in graph state (not serializable), so nodes reach it through `tools_for`. The
executor runs the run's evaluations (here, or on a Ray cluster).
"""

from __future__ import annotations

import atexit
from dataclasses import dataclass

from kernelcrew.graph.context import RunContext
from kernelcrew.kernels.kernelfile import KernelFile, parse_kernel_text
from kernelcrew.kernels.spec import OpSpec, load_op
from kernelcrew.results import CompileResult
from kernelcrew.tools.backends.backend import Backend, get_backend
from kernelcrew.tools.config import BenchSettings, Limits
from kernelcrew.tools.executor import Executor, Workbench, make_executor
from kernelcrew.tools.judge.harness import Harness


@dataclass
class RunTools:
    spec: OpSpec
    backend: Backend
    harness: Harness
    bench: Workbench
    executor: Executor

    def compile(self, kf: KernelFile) -> CompileResult:
        return self.bench.compile(kf)

    def parse(self, text: str, path=None) -> KernelFile:
        return parse_kernel_text(text, self.backend.name, path=path)


_TOOLS: dict[str, RunTools] = {}


def tools_for(state: dict, ctx: RunContext) -> RunTools:
    run_dir = state["run_dir"]
    if run_dir not in _TOOLS:
        backend = get_backend(state["backend"])
        spec = load_op(state["op_path"], backend.name)  # the groups this backend runs
        bench = BenchSettings(reps=ctx.reps, min_speedup=ctx.min_speedup, cache=ctx.cache)
        harness = Harness(spec, backend, seed=state["seed"], limits=Limits(timeout_s=ctx.timeout_s),
                          bench=bench)
        bench = Workbench(spec, backend, harness)
        executor = make_executor(ctx.executor, bench, seed=state["seed"],
                                 ray_address=ctx.ray_address)
        _TOOLS[run_dir] = RunTools(spec, backend, harness, bench, executor)
    return _TOOLS[run_dir]


def release(run_dir: str) -> None:
    tools = _TOOLS.pop(run_dir, None)
    if tools:
        tools.executor.close()
        tools.harness.close()


@atexit.register
def _cleanup() -> None:
    for run_dir in list(_TOOLS):
        release(run_dir)
