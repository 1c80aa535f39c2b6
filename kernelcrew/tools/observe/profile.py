"""`kernelcrew profile`: one kernel on one representative case, as a short structured
bottleneck summary (observe step of the graph).

The backends' profilers (cpu_profile, cuda_profile) measure; `summary` holds the
template, the roofline and the bottleneck rules they share; this module picks the
backend and the case.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from kernelcrew.errors import InputError
from kernelcrew.kernels.formats import FORMATS
from kernelcrew.kernels.kernelfile import KernelFile, load_kernel, validate_against
from kernelcrew.kernels.spec import OpSpec, load_op
from kernelcrew.results import ProfileResult
from kernelcrew.tools.backends.backend import auto_backend
from kernelcrew.tools.config import BenchSettings, Limits
from kernelcrew.tools.observe.cpu_profile import profile_cpu
from kernelcrew.tools.observe.cuda_profile import profile_cuda
from kernelcrew.tools.observe.summary import ProfileFailed, Say, pick_case

__all__ = ["PROFILERS", "ProfileFailed", "pick_case", "profile"]

# backend -> its profiler: f(spec, kf, case, *, bench, limits, threads, say) -> ProfileResult
PROFILERS: dict[str, Callable[..., ProfileResult]] = {"cpu": profile_cpu, "cuda": profile_cuda}


def profile(op: str | Path | OpSpec, kernel: str | Path | KernelFile | None = None,
            backend: str = "cpu", *, case: str | None = None, bench: BenchSettings | None = None,
            limits: Limits | None = None, threads: int | None = None,
            progress: Say | None = None) -> ProfileResult:
    """Profile `kernel` (default: the op's baseline) on one case; see the module doc.

    `threads` (CPU): OpenMP threads for the kernel, default all this process may use."""
    if backend == "auto":
        backend = auto_backend()
    if backend not in PROFILERS:
        known = ", ".join(PROFILERS)
        raise InputError(f"unknown backend {backend!r} for a profile; use {known}"
                         if backend not in FORMATS else
                         f"the {backend} backend has no profiler; profiles exist for {known}")
    spec = load_op(op, backend)  # the backend's own shape groups (op.yaml `backend_shapes`)
    if kernel is None:
        kf = load_kernel(spec.baseline_path(backend))
    elif isinstance(kernel, KernelFile):
        kf = kernel
    else:
        kf = load_kernel(kernel)
    if kf.backend != backend:
        raise InputError(f"is a {kf.backend} kernel file but the backend is {backend}; pass "
                         f"--backend {kf.backend}", path=kf.path)
    validate_against(kf, spec)
    chosen = pick_case(spec, case)
    if bench is None:  # a profile needs a median, not the gate's anti-replay input sets
        bench = replace(BenchSettings(), input_sets=1)
    if threads is not None and threads < 1:
        raise InputError(f"threads must be at least 1, not {threads}")
    return PROFILERS[backend](spec, kf, chosen, bench=bench, limits=limits, threads=threads,
                              say=progress)
