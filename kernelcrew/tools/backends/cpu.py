"""CPU backend: g++ builds a shared library; the worker calls it through ctypes."""

from __future__ import annotations

import shutil

from kernelcrew.errors import PolicyViolation
from kernelcrew.kernels.kernelfile import KernelFile
from kernelcrew.kernels.policy import check_source
from kernelcrew.kernels.spec import OpSpec
from kernelcrew.results import CompileResult
from kernelcrew.tools.backends.backend import Backend, PeakRates
from kernelcrew.tools.backends.compile import compile_cached, machine_fingerprint, tool_version
from kernelcrew.tools.backends.cpuinfo import CXX, cpu_threads, llc_bytes
from kernelcrew.tools.backends.symbols import refused_symbols


class CpuBackend(Backend):
    name = "cpu"
    suffix = ".cpp"
    # The parent's clock times a call through a round trip to the stopped worker: about
    # 0.03-0.05 ms on the development machine (the least of which is subtracted), more for
    # a kernel whose OpenMP team is woken from the stop. Medians under 0.1 ms read as the
    # floor: such cases are "same", not a speedup or a regression the clock cannot resolve.
    timing_floor_ms = 0.1

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

        res = compile_cached(
            source_text=kf.text, source_name="kernel.cpp", argv_for=argv, artifact_name="kernel.so",
            key_parts=("cpu", flags, tool_version(CXX), machine_fingerprint()),
        )
        if res.ok and res.artifact:
            why = refused_symbols(res.artifact)
            if why:
                return res.model_copy(update={"ok": False,
                                              "reason": f"refused after compiling: {why}"})
        return res

    def cache_bytes(self) -> int | None:
        """The last-level cache a cold timed run is flushed from."""
        return llc_bytes()

    def peak_rates(self) -> PeakRates:
        """The highest rates any of the measurements allow (peaks measured on a busy
        machine read low, and a floor must never be too high), for a kernel that only
        reads (the highest ceiling of any mix)."""
        from kernelcrew.tools.backends import peaks

        try:
            pk = peaks.cpu_peaks()
        except RuntimeError as e:  # the peak benchmark failed: no floor, and say so
            return PeakRates(None, None, None, None, f"peaks unknown ({e})")
        gbps = peaks.bandwidth_ceiling(
            max(pk.triad_gbps, pk.triad_1t_gbps * pk.threads, pk.numpy_copy_gbps),
            max(pk.read_gbps or 0, (pk.read_1t_gbps or 0) * pk.threads) or None, 0.0)
        warm = max(pk.read_warm_gbps or 0, pk.triad_warm_gbps or 0) or None
        return PeakRates(gbps, max(warm or 0, gbps) or None,
                         max(pk.fma_gflops, pk.fma_1t_gflops * pk.threads),
                         int(pk.llc_mib * 2**20) if pk.llc_mib else None, "cpu peaks")

    def worker_env(self) -> dict[str, str]:
        n = str(cpu_threads())
        return {"OMP_NUM_THREADS": n, "OMP_PROC_BIND": "false", "OPENBLAS_NUM_THREADS": "1"}

    def describe(self) -> str:
        return f"cpu ({cpu_threads()} threads, {tool_version(CXX)})"
