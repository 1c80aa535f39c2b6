"""Per-process tools of a run (spec, backend, harness), rebuilt on resume.

The harness holds the inputs and float64 references of the run's seed; it cannot
live in graph state (not serializable), so nodes reach it through `tools_for`.
"""

from __future__ import annotations

import atexit
from dataclasses import dataclass, field

from kernelcrew.graph.context import RunContext
from kernelcrew.kernels.kernelfile import KernelFile, parse_kernel_text
from kernelcrew.kernels.spec import OpSpec, load_op
from kernelcrew.results import CompileResult
from kernelcrew.tools.backends.backend import Backend, get_backend
from kernelcrew.tools.config import BenchSettings, Limits
from kernelcrew.tools.judge.harness import Harness


@dataclass
class RunTools:
    spec: OpSpec
    backend: Backend
    harness: Harness
    compiled: dict[str, CompileResult] = field(default_factory=dict)  # digest -> result

    def compile(self, kf: KernelFile) -> CompileResult:
        key = kf.digest()
        if key not in self.compiled:
            self.compiled[key] = self.backend.compile(kf, self.spec)
        return self.compiled[key]

    def parse(self, text: str, path=None) -> KernelFile:
        return parse_kernel_text(text, self.backend.name, path=path)


_TOOLS: dict[str, RunTools] = {}


def tools_for(state: dict, ctx: RunContext) -> RunTools:
    run_dir = state["run_dir"]
    if run_dir not in _TOOLS:
        spec = load_op(state["op_path"])
        backend = get_backend(state["backend"])
        bench = BenchSettings(reps=ctx.reps, min_speedup=ctx.min_speedup, cache=ctx.cache)
        harness = Harness(spec, backend, seed=state["seed"], limits=Limits(timeout_s=ctx.timeout_s),
                          bench=bench)
        _TOOLS[run_dir] = RunTools(spec, backend, harness)
    return _TOOLS[run_dir]


def release(run_dir: str) -> None:
    tools = _TOOLS.pop(run_dir, None)
    if tools:
        tools.harness.close()


@atexit.register
def _cleanup() -> None:
    for run_dir in list(_TOOLS):
        release(run_dir)
