"""CPU backend: g++ builds a shared library; the worker calls it through ctypes."""

from __future__ import annotations

import functools
import os
import shutil
from pathlib import Path

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

def llc_bytes() -> int | None:
    """Size of the largest cache of cpu0, from sysfs."""
    best = None
    base = Path("/sys/devices/system/cpu/cpu0/cache")
    for idx in base.glob("index*"):
        try:
            text = (idx / "size").read_text().strip()
        except OSError:
            continue
        mult = {"K": 2**10, "M": 2**20, "G": 2**30}.get(text[-1:].upper(), 1)
        digits = text.rstrip("KkMmGg")
        if digits.isdigit():
            size = int(digits) * mult
            best = max(best or 0, size)
    return best


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

    def cache_bytes(self) -> int | None:
        """The last-level cache a cold timed run is flushed from."""
        return llc_bytes()

    def worker_env(self) -> dict[str, str]:
        n = str(cpu_threads())
        return {"OMP_NUM_THREADS": n, "OMP_PROC_BIND": "false", "OPENBLAS_NUM_THREADS": "1"}

    def describe(self) -> str:
        return f"cpu ({cpu_threads()} threads, {tool_version(CXX)})"
