"""A third backend, as a user would add one: the CPU backend with every kernel held to one
OpenMP thread (single-thread figures on a many-core machine), its kernel files ending in
`.cpu1.cpp`. It reuses the CPU backend's compiler and worker; what it adds is its name, its
files' ending, the worker's environment and its description."""

from __future__ import annotations

from dataclasses import replace

from kernelcrew.kernels.formats import FORMATS, KernelFormat
from kernelcrew.tools.backends.compile import tool_version
from kernelcrew.tools.backends.cpu import CpuBackend
from kernelcrew.tools.backends.cpuinfo import CXX


class OneThreadBackend(CpuBackend):
    name = "cpu1"
    suffix = ".cpu1.cpp"

    def worker_env(self) -> dict[str, str]:
        return {**super().worker_env(), "OMP_NUM_THREADS": "1"}

    def describe(self) -> str:
        return f"cpu1 (1 thread, {tool_version(CXX)})"


# its kernel files are the CPU's C++ files under another ending; it races the CPU baseline
FORMAT: KernelFormat = replace(FORMATS["cpu"], backend="cpu1", suffixes=(".cpu1.cpp",),
                               baselines="cpu")
