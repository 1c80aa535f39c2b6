"""CPU backend: g++ builds a shared library; the worker calls it through ctypes."""

from __future__ import annotations

import functools
import os
import shutil

from kernelcrew.errors import PolicyViolation
from kernelcrew.kernels.kernelfile import KernelFile
from kernelcrew.kernels.policy import check_source
from kernelcrew.kernels.spec import OpSpec
from kernelcrew.results import CompileResult
from kernelcrew.tools.backends.backend import Backend
from kernelcrew.tools.backends.compile import compile_cached, machine_fingerprint, tool_version

CXX = os.environ.get("KERNELCREW_CXX", "g++")


@functools.cache
def cpu_threads() -> int:
    """Threads a kernel may use: the cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


class CpuBackend(Backend):
    name = "cpu"
    suffix = ".cpp"

    def can_run(self) -> tuple[bool, str]:
        if shutil.which(CXX) is None:
            return False, f"{CXX} not found; install g++"
        return True, ""

    def compile(self, kf: KernelFile, spec: OpSpec, *, extra_flags: tuple[str, ...] = ()
                ) -> CompileResult:
        try:
            check_source(kf.text, "cpu", path=kf.path)
        except PolicyViolation as e:
            return CompileResult(ok=False, reason=f"refused before compiling: {e}")
        flags = list(kf.meta.flags) + kf.defines + list(extra_flags)

        def argv(src, out):
            return [CXX, "-std=c++17", "-shared", "-fPIC", "-fno-gnu-unique", *flags,
                    str(src.name), "-o", str(out.name)]

        return compile_cached(
            source_text=kf.text, source_name="kernel.cpp", argv_for=argv, artifact_name="kernel.so",
            key_parts=("cpu", flags, tool_version(CXX), machine_fingerprint()),
        )

    def worker_env(self) -> dict[str, str]:
        n = str(cpu_threads())
        return {"OMP_NUM_THREADS": n, "OMP_PROC_BIND": "false", "OPENBLAS_NUM_THREADS": "1"}

    def describe(self) -> str:
        return f"cpu ({cpu_threads()} threads, {tool_version(CXX)})"
