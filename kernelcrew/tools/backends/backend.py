"""The small interface every backend implements, and the lazy registry of backends."""

from __future__ import annotations

import importlib
from abc import ABC, abstractmethod
from typing import ClassVar

from kernelcrew.errors import InputError
from kernelcrew.kernels.kernelfile import KernelFile
from kernelcrew.kernels.spec import OpSpec
from kernelcrew.results import CompileResult

# name -> "module:Class"; imported on first use so a missing extra (CuPy) costs only
# the backend that needs it.
REGISTRY: dict[str, str] = {
    "cpu": "kernelcrew.tools.backends.cpu:CpuBackend",
    "cuda": "kernelcrew.tools.backends.cuda:CudaBackend",
}


class Backend(ABC):
    name: ClassVar[str]
    suffix: ClassVar[str]  # kernel file suffix
    # Times below this are dominated by call overhead and timer resolution: medians are
    # clamped to it before speedups are taken, so such cases read as "same", not as noise.
    timing_floor_ms: ClassVar[float] = 0.02

    @abstractmethod
    def can_run(self) -> tuple[bool, str]:
        """Whether kernels can execute here, and if not why (one line)."""

    @abstractmethod
    def compile(self, kf: KernelFile, spec: OpSpec) -> CompileResult:
        """Check the source's policy, then build the artifact the worker loads."""

    def worker_env(self) -> dict[str, str]:
        """Extra environment for the worker process."""
        return {}

    def describe(self) -> str:
        """Device/compiler in a few words, for reports."""
        return self.name


def get_backend(name: str) -> Backend:
    if name == "auto":
        name = auto_backend()
    if name not in REGISTRY:
        raise InputError(f"unknown backend {name!r}; use one of {', '.join(REGISTRY)} or auto")
    module, cls = REGISTRY[name].split(":")
    return getattr(importlib.import_module(module), cls)()


def auto_backend() -> str:
    """cuda when a GPU is usable here, else cpu."""
    try:
        cuda = get_backend("cuda")
        if cuda.can_run()[0]:
            return "cuda"
    except ImportError:
        pass
    return "cpu"
