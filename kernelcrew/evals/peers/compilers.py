"""Other compilers as peers: the baseline's own source built by clang at -O3 -march=native,
and by clang with Polly, the polyhedral optimizer any user can install from their
distribution (`-mllvm -polly -mllvm -polly-parallel -fopenmp`: tiling, fusion, outer-loop
vectorization and OpenMP threads chosen by the compiler).

Each peer compiles the kernel file with its own compiler and flags (the file's own flags
are replaced; -fopenmp is added where the source has OpenMP pragmas, as for the compiler
alone), into the same kind of shared library the CPU backend builds, so the harness runs
and times it like any kernel. Every kernel runs in a fresh worker process, so clang's
OpenMP runtime (libomp) and GCC's (libgomp) never meet in one process.

A missing clang, or a clang without Polly, is skipped with a note, never an error.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from kernelcrew.errors import PolicyViolation
from kernelcrew.kernels.kernelfile import KernelFile
from kernelcrew.kernels.policy import check_source
from kernelcrew.kernels.spec import OpSpec
from kernelcrew.results import CompileResult
from kernelcrew.tools.backends.compile import compile_cached, machine_fingerprint, tool_version
from kernelcrew.tools.backends.cpu import CpuBackend

CLANG_ENV = "KERNELCREW_CLANG"  # a clang++ to use instead of the newest one found
CLANG_NAMES = ("clang++-19", "clang++-20", "clang++-18", "clang++-17", "clang++")
BASE_FLAGS = ("-O3", "-march=native")
POLLY_FLAGS = ("-mllvm", "-polly", "-mllvm", "-polly-parallel", "-fopenmp")
# C's `register` is an error in C++17 for clang (g++ warns)
CLANG_ONLY = ("-Wno-register",)


@dataclass(frozen=True)
class CompilerPeer:
    label: str  # as the report names it
    exe: str
    flags: tuple[str, ...]

    def flags_for(self, kf: KernelFile) -> list[str]:
        from kernelcrew.evals.peers.side_by_side import has_openmp_pragmas

        omp = ["-fopenmp"] if has_openmp_pragmas(kf) and "-fopenmp" not in self.flags else []
        return [*self.flags, *omp, *CLANG_ONLY]

    def command(self, kf: KernelFile) -> str:
        return " ".join([Path(self.exe).name, *self.flags_for(kf)])


def find_clang() -> str | None:
    given = os.environ.get(CLANG_ENV)
    if given:
        return shutil.which(given)
    return next((p for n in CLANG_NAMES if (p := shutil.which(n))), None)


@functools.cache
def _builds(exe: str, flags: tuple[str, ...]) -> str:
    """'' where `exe flags` builds a small parallel loop into a shared library, else why."""
    src = ('extern "C" void f(double* a, const double* b, long n) {\n'
           "  for (long i = 0; i < n; ++i) for (long j = 0; j < n; ++j)\n"
           "    a[i * n + j] += b[j * n + i];\n}\n")
    with tempfile.TemporaryDirectory(prefix="kc-clang-") as d:
        (Path(d) / "t.cpp").write_text(src)
        try:
            r = subprocess.run([exe, "-std=c++17", "-shared", "-fPIC", *flags, "t.cpp", "-o",
                                "t.so"], cwd=d, capture_output=True, text=True, timeout=120,
                               check=False)
        except (OSError, subprocess.TimeoutExpired) as e:
            return str(e)
    if r.returncode != 0:
        return (r.stderr.strip().splitlines() or ["failed"])[-1][:200]
    return ""


def compiler_peers() -> tuple[list[CompilerPeer], list[str]]:
    """The compiler peers this machine has, and a note for each one it lacks."""
    exe = find_clang()
    if exe is None:
        return [], [(f"clang not installed (looked for {', '.join(CLANG_NAMES)}; or set "
                     f"{CLANG_ENV}): the clang -O3 and clang+Polly peers are skipped")]
    peers, notes = [], []
    for label, flags in (("clang -O3", BASE_FLAGS), ("clang+Polly", BASE_FLAGS + POLLY_FLAGS)):
        why = _builds(exe, flags + CLANG_ONLY)
        if why:
            notes.append(f"{label} skipped: {Path(exe).name} {' '.join(flags)} does not build "
                         f"here ({why})")
        else:
            peers.append(CompilerPeer(label, exe, flags))
    return peers, notes


class PeerCompilerBackend(CpuBackend):
    """The CPU backend with a peer's compiler and flags in place of the kernel's."""

    def __init__(self, peer: CompilerPeer) -> None:
        self.peer = peer

    def compile(self, kf: KernelFile, spec: OpSpec, *, extra_flags: tuple[str, ...] = ()
                ) -> CompileResult:
        try:
            check_source(kf.text, "cpu", path=kf.path)
        except PolicyViolation as e:
            return CompileResult(ok=False, reason=f"refused before compiling: {e}")
        flags = [*self.peer.flags_for(kf), *kf.defines, *extra_flags]

        def argv(src, out):
            return [self.peer.exe, "-std=c++17", "-shared", "-fPIC", *flags, str(src.name),
                    "-o", str(out.name)]

        return compile_cached(
            source_text=kf.text, source_name="kernel.cpp", argv_for=argv,
            artifact_name="kernel.so",
            key_parts=("cpu-peer", self.peer.exe, flags, tool_version(self.peer.exe),
                       machine_fingerprint()))

    def describe(self) -> str:
        return f"{self.peer.label} ({tool_version(self.peer.exe)})"
