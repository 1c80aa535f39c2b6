"""CPU backend: g++ (or the clang++ a kernel file names) builds a shared library; the
worker calls it through ctypes.

A kernel built with clang++ runs in the same worker as kernels built with g++, so it must
not bring a second OpenMP runtime into the process: clang's own `-fopenmp` calls LLVM's
libomp (`__kmpc_*`), and clang has no code generation for GCC's libgomp. A clang++ build
therefore honours `omp simd` (`-fopenmp-simd`) but not the threading pragmas, which it
compiles as serial code; Polly's `-polly-parallel` emits its own calls to libgomp
(`GOMP_*`), which the build links against. A clang-built library that still imports an
`__kmpc_*` symbol is refused after compiling, like any symbol outside the allow-list."""

from __future__ import annotations

import shutil

from kernelcrew.errors import PolicyViolation
from kernelcrew.kernels.flags import build_flags, compiler_family, find_compiler
from kernelcrew.kernels.kernelfile import KernelFile
from kernelcrew.kernels.policy import check_source
from kernelcrew.kernels.spec import OpSpec
from kernelcrew.results import CompileResult
from kernelcrew.tools.backends.backend import Backend, PeakRates
from kernelcrew.tools.backends.compile import compile_cached, machine_fingerprint, tool_version
from kernelcrew.tools.backends.cpuinfo import CXX, cpu_threads, llc_bytes
from kernelcrew.tools.backends.symbols import SymbolError, refused_symbols, undefined_symbols


def compiler_argv(compiler: str | None, flags: list[str]) -> tuple[str | None, list[str]]:
    """(the executable, the flags it is given) for a kernel file's compiler and flags:
    g++ (or KERNELCREW_CXX) as they are; clang++ with `-fopenmp` as `-fopenmp-simd`,
    `-Wno-register` (C++17 refuses `register`, which old C code is full of) and libgomp
    linked where Polly threads loops. The executable is None when not installed."""
    if compiler_family(compiler) != "clang++":
        exe = shutil.which(compiler) if compiler else shutil.which(CXX) and CXX
        return exe, ["-fno-gnu-unique", *build_flags(compiler, flags)]
    return find_compiler(compiler), build_flags(compiler, flags)


def _libomp_symbols(lib: object) -> str:
    """Why a clang-built library may not run beside g++-built ones ("" when it may)."""
    try:
        names = undefined_symbols(lib)
    except (SymbolError, OSError) as e:
        return f"its dynamic symbols could not be checked: {e}"
    kmpc = sorted(n for n in names if n.startswith("__kmpc_"))
    if kmpc:
        return (f"the kernel imports `{kmpc[0]}` (LLVM's OpenMP runtime): a clang++ kernel "
                "must use only GCC's libgomp, which every other kernel in the worker uses")
    return ""


class CpuBackend(Backend):
    name = "cpu"
    suffix = ".cpp"
    # The parent's clock times a call through a round trip to the stopped worker: about
    # 0.03-0.05 ms on an idle AMD VM, and on a 2-core Xeon VM a 1x1 transpose read 0.001 to
    # 0.13 ms after the least round trip was subtracted. Medians under 0.2 ms read as the
    # floor: such cases are "same", not a speedup or a regression the clock cannot resolve
    # (the judge raises it further where a call of nothing jitters more: judge.timing_floor).
    timing_floor_ms = 0.2

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
        exe, own = compiler_argv(kf.meta.compiler, list(kf.meta.flags))
        if exe is None:
            name = kf.meta.compiler or CXX
            return CompileResult(ok=False, reason=f"compiler {name} is not installed here "
                                 "(install it, or remove `compiler:` to build with g++)")
        flags = own + kf.defines + list(extra_flags)

        def argv(src, out):
            return [exe, "-std=c++17", "-shared", "-fPIC", *flags,
                    str(src.name), "-o", str(out.name)]

        res = compile_cached(
            source_text=kf.text, source_name="kernel.cpp", argv_for=argv, artifact_name="kernel.so",
            key_parts=("cpu", exe, flags, tool_version(exe), machine_fingerprint()),
        )
        if res.ok and res.artifact:
            why = refused_symbols(res.artifact)
            if not why and compiler_family(kf.meta.compiler) == "clang++":
                why = _libomp_symbols(res.artifact)
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
