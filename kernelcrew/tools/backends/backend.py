"""The small interface every backend implements, and the lazy registry of backends."""

from __future__ import annotations

import importlib
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import ClassVar

from kernelcrew.errors import InputError
from kernelcrew.kernels.kernelfile import KernelFile
from kernelcrew.kernels.spec import OpSpec
from kernelcrew.results import CompileResult
from kernelcrew.tools.config import Limits

# name -> "module:Class"; imported on first use so a missing extra (CuPy) costs only
# the backend that needs it.
REGISTRY: dict[str, str] = {
    "cpu": "kernelcrew.tools.backends.cpu:CpuBackend",
    "cuda": "kernelcrew.tools.backends.cuda:CudaBackend",
}


@dataclass(frozen=True)
class PeakRates:
    """What the machine a backend runs on can do at best, for the judge's roofline floor
    (each None where unknown: that bound is then not applied)."""

    gbps: float | None  # memory bandwidth for data larger than the cache
    cache_gbps: float | None  # bandwidth on cache-resident data
    gflops: float | None
    cache_bytes: int | None  # the cache the data must exceed for `gbps` to apply
    what: str  # where the figures come from, in a few words


class Backend(ABC):
    """What the judge needs of a backend: compile a kernel file, run its worker, time it.

    The contract the judge relies on, beyond the two abstract methods:
    - `untrusted_host`: the kernel's code runs in the worker's own process on the host (a
      CPU kernel does; a CUDA kernel is device code, the worker's host code is
      kernelcrew's). Such a worker is stopped between calls, guarded (no new processes,
      no signal handlers), its stderr never quoted, its kernels' dynamic symbols
      checked, and the parent times its calls with its own clock.
    - `device_timer`: the worker reports each call's time from a device timer its own
      (trusted) host code reads, and that report is the measurement; otherwise the
      parent's clock is.
    - the worker's outputs come back in the parent's shared buffers: a worker whose data
      lives elsewhere (a device) copies them there after every call, the parent poisons
      them before.
    """

    name: ClassVar[str]
    suffix: ClassVar[str]  # kernel file suffix
    # Times below this are dominated by call overhead and timer resolution: medians are
    # clamped to it before speedups are taken, so such cases read as "same", not as noise.
    timing_floor_ms: ClassVar[float] = 0.02
    untrusted_host: ClassVar[bool] = True
    device_timer: ClassVar[bool] = False

    @abstractmethod
    def can_run(self) -> tuple[bool, str]:
        """Whether kernels can execute here, and if not why (one line)."""

    @abstractmethod
    def compile(self, kf: KernelFile, spec: OpSpec) -> CompileResult:
        """Check the source's policy, then build the artifact the worker loads."""

    def worker_env(self) -> dict[str, str]:
        """Extra environment for the worker process."""
        return {}

    def worker_devices(self) -> list[str]:
        """Device nodes the worker's sandbox must let it open."""
        return []

    def worker_address_space_gib(self, limits: Limits) -> float | None:
        """The worker's RLIMIT_AS (None: none; a GPU driver reserves address space for the
        whole device)."""
        return limits.address_space_gib

    def cache_bytes(self) -> int | None:
        """The cache a cold timed run is flushed from (None: unknown)."""
        return None

    def peak_rates(self) -> PeakRates:
        """The machine's peaks for the roofline floor (measured once and cached)."""
        return PeakRates(None, None, None, None, "no peaks for this backend")

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
