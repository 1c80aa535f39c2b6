"""The work of one evaluation, the same wherever it runs: parse, compile (cached by the
kernel's digest), verify in sandboxed workers, race side by side. A `Workbench` holds one
run's spec, backend and harness; the local executor uses the run's own, a Ray node
rebuilds one from a `RunSetup` (see `workbench_for`)."""

from __future__ import annotations

import atexit
import os
import shutil
import socket
from collections import OrderedDict
from pathlib import Path

from kernelcrew.errors import InputError
from kernelcrew.kernels.kernelfile import KernelFile, parse_kernel_text, validate_against
from kernelcrew.kernels.spec import OpSpec, load_op
from kernelcrew.results import CompileResult
from kernelcrew.tools.backends.backend import Backend, get_backend
from kernelcrew.tools.config import BenchSettings, Limits, scratch_root
from kernelcrew.tools.executor.base import (
    EvalResult,
    Evaluation,
    NodeUnfit,
    RaceOutcome,
    RunSetup,
    VerifyOutcome,
)
from kernelcrew.tools.judge import evaluate as ev
from kernelcrew.tools.judge.harness import Harness


class Workbench:
    def __init__(self, spec: OpSpec, backend: Backend, harness: Harness) -> None:
        self.spec, self.backend, self.harness = spec, backend, harness
        self.compiled: dict[str, CompileResult] = {}  # digest -> result

    def compile(self, kf: KernelFile) -> CompileResult:
        key = kf.digest()
        if key not in self.compiled:
            self.compiled[key] = self.backend.compile(kf, self.spec)
        return self.compiled[key]

    def parse(self, text: str, path: str | Path | None = None) -> KernelFile:
        return parse_kernel_text(text, self.backend.name, path=Path(path) if path else None)

    def compile_text(self, text: str, path: str) -> CompileResult:
        """Front matter and policy problems are compile errors the author can read."""
        try:
            kf = self.parse(text, path)
            validate_against(kf, self.spec)
        except InputError as e:
            return CompileResult(ok=False, reason=f"invalid kernel file: {e}")
        return self.compile(kf)

    def _built(self, text: str, path: str) -> tuple[CompileResult, KernelFile]:
        kf = self.parse(text, path)
        comp = self.compile(kf)
        if not comp.ok:  # it compiled before it was sent here: this node cannot build it
            raise NodeUnfit(f"{Path(path).name} does not compile on {socket.gethostname()}: "
                            f"{comp.reason}")
        return comp, kf

    def run(self, e: Evaluation) -> EvalResult:
        """One evaluation; `node`/`host` are the caller's to fill in."""
        if e.stage == "compile":
            return EvalResult(key=e.key, stage=e.stage, compile=self.compile_text(e.kernel, e.path))
        comp, kf = self._built(e.kernel, e.path)
        if e.stage == "verify":
            run = ev.verify(self.harness, comp, kf)
            out = VerifyOutcome(correct=run.correct, failure=run.first_failure(), rows=run.rows,
                                sandbox=run.outcome.sandbox)
            return EvalResult(key=e.key, stage=e.stage, compile=comp, verify=out)
        if e.incumbent is None:
            raise ValueError(f"race {e.key} without an incumbent")
        inc = self._built(e.incumbent, e.incumbent_path or "incumbent")
        race = ev.race(self.harness, (comp, kf), inc, against=e.against)
        g = race.gate
        out = RaceOutcome(verdict=g.verdict, speedup=g.speedup, band=g.band,
                          measured_noise=g.measured_noise, min_speedup=g.min_speedup,
                          rounds=g.rounds, reason=g.reason, groups=g.group_speedups,
                          rows=race.rows, failure=race.failure)
        return EvalResult(key=e.key, stage=e.stage, compile=comp, race=out)

    def close(self) -> None:
        self.harness.close()


# -- on a node: workbenches rebuilt from a RunSetup, a few kept per process -------------
_KEEP = 4
_BENCHES: OrderedDict[str, Workbench] = OrderedDict()


def workbench_for(setup: RunSetup) -> Workbench:
    key = setup.digest()
    if key in _BENCHES:
        _BENCHES.move_to_end(key)
        return _BENCHES[key]
    folder = scratch_root() / "ops" / key / setup.op_name
    if not (folder / "op.yaml").exists():
        tmp = folder.with_name(f"{folder.name}.{os.getpid()}.tmp")
        for rel, data in setup.op_files.items():
            p = tmp / rel
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_bytes(data)
        folder.parent.mkdir(parents=True, exist_ok=True)
        try:
            tmp.rename(folder)
        except OSError:  # another worker of this node made it first
            shutil.rmtree(tmp, ignore_errors=True)
    backend = get_backend(setup.backend)
    spec = load_op(folder, backend.name)  # the backend's own shape groups
    harness = Harness(spec, backend, seed=setup.seed, limits=Limits(**setup.limits),
                      bench=BenchSettings(**setup.bench))
    _BENCHES[key] = Workbench(spec, backend, harness)
    while len(_BENCHES) > _KEEP:
        _BENCHES.popitem(last=False)[1].close()
    return _BENCHES[key]


@atexit.register
def _close_all() -> None:
    while _BENCHES:
        _BENCHES.popitem()[1].close()
