"""Allow-lists of optimization flags a kernel file may ask for, per compiler.

The harness adds target, output, include and linkage flags itself; a kernel file
may only choose how its code is optimized. Anything that reads or writes files
(-include, -o, @file, plugins, -B, specs), defines macros outside knobs, or
changes the ABI is refused.

A CPU kernel file may name its compiler (`compiler: clang++`; g++ when it names none).
Each compiler has its own list: clang's holds the Polly options (`-mllvm=-polly`, ...)
as whole tokens, never a bare `-mllvm` that would pass any LLVM option on.
"""

from __future__ import annotations

import functools
import re
import shutil
import subprocess

from kernelcrew.errors import InputError, PolicyViolation
from kernelcrew.kernels.formats import format_for

_CPU_EXACT = {
    "-O0", "-O1", "-O2", "-O3", "-Os", "-Ofast",
    "-march=native", "-mtune=native", "-fopenmp", "-fopenmp-simd",
    "-funroll-loops", "-funroll-all-loops", "-fno-unroll-loops",
    "-ftree-vectorize", "-fno-tree-vectorize", "-ffast-math", "-fno-math-errno",
    "-fno-trapping-math", "-fassociative-math", "-freciprocal-math", "-fno-signed-zeros",
    "-ffp-contract=fast", "-ffp-contract=off", "-fno-strict-aliasing", "-fstrict-aliasing",
    "-fprefetch-loop-arrays", "-fpeel-loops", "-fvect-cost-model=unlimited",
    "-fvect-cost-model=dynamic", "-fvect-cost-model=cheap", "-fno-semantic-interposition",
    "-fomit-frame-pointer", "-mfma", "-mavx", "-mavx2", "-mavx512f", "-mavx512bw",
    "-mavx512vl", "-mavx512dq", "-mf16c", "-msse4.2", "-mno-avx512f",
}
_CPU_PATTERNS = [
    r"-mprefer-vector-width=(128|256|512)",
    r"--param=max-unroll-times=\d{1,2}",
    r"-falign-loops=\d{1,3}",
]

# clang++: the same kinds of flags in clang's spelling (no GCC-only cost models or
# --param), and Polly's polyhedral optimizer as exact `-mllvm=` tokens
POLLY = "-mllvm=-polly"
POLLY_PARALLEL = "-mllvm=-polly-parallel"
_POLLY_EXACT = {
    POLLY, POLLY_PARALLEL, "-mllvm=-polly-vectorizer=stripmine",
    "-mllvm=-polly-vectorizer=none", "-mllvm=-polly-tiling", "-mllvm=-polly-tiling=false",
    "-mllvm=-polly-2nd-level-tiling", "-mllvm=-polly-register-tiling",
    "-mllvm=-polly-pattern-matching-based-opts=false", "-mllvm=-polly-process-unprofitable",
    "-mllvm=-polly-invariant-load-hoisting", "-mllvm=-polly-scheduling=dynamic",
    "-mllvm=-polly-scheduling=static",
}
_CLANG_EXACT = {
    "-O0", "-O1", "-O2", "-O3", "-Os", "-Ofast",
    "-march=native", "-mtune=native", "-fopenmp", "-fopenmp-simd",
    "-funroll-loops", "-fno-unroll-loops", "-fvectorize", "-fno-vectorize",
    "-fslp-vectorize", "-fno-slp-vectorize", "-ffast-math", "-fno-math-errno",
    "-fno-trapping-math", "-fassociative-math", "-freciprocal-math", "-fno-signed-zeros",
    "-ffp-contract=fast", "-ffp-contract=on", "-ffp-contract=off", "-fno-strict-aliasing",
    "-fstrict-aliasing", "-fno-semantic-interposition", "-fomit-frame-pointer", "-mfma",
    "-mavx", "-mavx2", "-mavx512f", "-mavx512bw", "-mavx512vl", "-mavx512dq", "-mf16c",
    "-msse4.2", "-mno-avx512f", *_POLLY_EXACT,
}
_CLANG_PATTERNS = [r"-mprefer-vector-width=(128|256|512)"]

# the compilers a CPU kernel file may name: the family, optionally with a version suffix
COMPILERS = ("g++", "clang++")
_COMPILER_NAME = re.compile(r"^(g\+\+|clang\+\+)(-\d{1,2})?$")

_CUDA_EXACT = {
    "-O0", "-O1", "-O2", "-O3", "--use_fast_math", "-use_fast_math", "-lineinfo",
    "--extra-device-vectorization", "-ftz=true", "-ftz=false", "-prec-div=true",
    "-prec-div=false", "-prec-sqrt=true", "-prec-sqrt=false", "-fmad=true", "-fmad=false",
    "-Xptxas=-O3", "-Xptxas=-O2", "--restrict", "-restrict", "-dlcm=ca", "-Xptxas=-dlcm=ca",
    "-Xptxas=-dlcm=cg",
}
_CUDA_PATTERNS = [r"-maxrregcount=\d{2,3}", r"--maxrregcount=\d{2,3}"]

# a kernel format's `flags` names its allow-list: (exact flags, patterns)
ALLOW_LISTS: dict[str, tuple[set[str], list[str]]] = {
    "gcc": (_CPU_EXACT, _CPU_PATTERNS),
    "nvcc": (_CUDA_EXACT, _CUDA_PATTERNS),
}

KNOB_NAME = re.compile(r"^[A-Z_][A-Z0-9_]*$")


def compiler_family(compiler: str | None) -> str:
    """`g++` or `clang++` for a compiler name (None: the default, g++)."""
    if compiler is None:
        return "g++"
    m = _COMPILER_NAME.match(compiler)
    return m.group(1) if m else compiler


def check_compiler(compiler: str | None, backend: str, *, path: object = None) -> None:
    """A kernel file's `compiler:` names g++ or clang++ (a version suffix allowed), for
    kernel files g++ builds only; else an InputError that says what to write."""
    if compiler is None:
        return
    if format_for(backend, path=path).flags != "gcc":
        raise InputError(f"`compiler:` is for CPU kernel files ({backend} kernels build with "
                         "their own compiler); remove it", path=path, field="compiler")
    if not isinstance(compiler, str) or not _COMPILER_NAME.match(compiler):
        raise InputError(f"compiler {compiler!r} is not one kernelcrew builds with; write "
                         f"one of {', '.join(COMPILERS)} (a version suffix such as clang++-19 "
                         "is allowed)", path=path, field="compiler")


def check_flags(flags: list[str], backend: str, *, path: object = None,
                compiler: str | None = None) -> list[str]:
    """Return the flags if all are allowed (for `compiler` on a g++ format: g++'s list
    when None), else raise InputError naming the first bad one."""
    kind = format_for(backend, path=path).flags
    exact, patterns = ALLOW_LISTS[kind]
    who = backend
    if kind == "gcc" and compiler_family(compiler) == "clang++":
        exact, patterns, who = _CLANG_EXACT, _CLANG_PATTERNS, "clang++"
    for f in flags:
        if not isinstance(f, str):
            raise InputError(f"flag {f!r} is not a string", path=path, field="flags")
        if f in exact or any(re.fullmatch(p, f) for p in patterns):
            continue
        other = "" if kind != "gcc" else (
            " (it is on clang++'s list: add `compiler: clang++`)" if who != "clang++" and (
                f in _CLANG_EXACT or any(re.fullmatch(p, f) for p in _CLANG_PATTERNS)) else
            " (it is on g++'s list: remove `compiler:`)" if who == "clang++" and (
                f in _CPU_EXACT or any(re.fullmatch(p, f) for p in _CPU_PATTERNS)) else "")
        raise PolicyViolation(
            f"flag {f!r} is not on the {who} allow-list of optimization flags{other}; "
            "remove it (the harness sets target, output and include flags itself)",
            path=path, field="flags")
    if POLLY_PARALLEL in flags and POLLY not in flags:
        raise PolicyViolation(f"{POLLY_PARALLEL} needs {POLLY} too; add it", path=path,
                              field="flags")
    return list(flags)


def build_flags(compiler: str | None, flags: list[str]) -> list[str]:
    """The flags a kernel file's compiler is given for its flag list: g++'s as they are;
    clang++'s with `-fopenmp` as `-fopenmp-simd` (clang has no code generation for GCC's
    libgomp, the one OpenMP runtime of the worker, so `omp parallel` builds serial; `omp
    simd` is honoured), `-Wno-register` (C++17 refuses the `register` of old C code) and
    libgomp linked where Polly threads loops itself (`-polly-parallel` calls GOMP_*)."""
    if compiler_family(compiler) != "clang++":
        return list(flags)
    out = list(dict.fromkeys("-fopenmp-simd" if f == "-fopenmp" else f for f in flags))
    out.append("-Wno-register")
    if POLLY_PARALLEL in flags:
        out.append("-lgomp")
    return out


def find_compiler(compiler: str | None) -> str | None:
    """The executable a compiler name runs (None: not installed). `clang++` without a
    version is `clang++` on the PATH, else the newest `clang++-NN` there."""
    name = compiler or "g++"
    found = shutil.which(name)
    if found or compiler_family(name) != name or name != "clang++":
        return found
    for v in range(30, 9, -1):
        found = shutil.which(f"clang++-{v}")
        if found:
            return found
    return None


@functools.cache
def has_polly(exe: str) -> bool:
    """Whether a clang++ executable has Polly built in (Debian's and LLVM's packages do):
    an empty file compiles with `-mllvm=-polly`."""
    try:
        r = subprocess.run([exe, "-x", "c++", "-O1", POLLY, "-c", "-", "-o", "/dev/null"],
                           input="int f(int x) { return x; }\n", capture_output=True,
                           text=True, timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return r.returncode == 0


def knob_defines(knobs: dict[str, object], *, path: object = None) -> list[str]:
    """Knobs become -DNAME=VALUE; names are macros, values plain numbers."""
    out = []
    for k, v in knobs.items():
        if not KNOB_NAME.match(str(k)):
            raise InputError(f"knob name {k!r} must be UPPER_CASE letters, digits, _",
                             path=path, field="knobs")
        if isinstance(v, bool) or not isinstance(v, int | float):
            raise InputError(f"knob {k} = {v!r} must be a number", path=path, field="knobs")
        out.append(f"-D{k}={v}")
    return out


def allowed_flags(backend: str, compiler: str | None = None) -> list[str]:
    kind = format_for(backend).flags
    if kind == "gcc" and compiler_family(compiler) == "clang++":
        return sorted(_CLANG_EXACT)
    return sorted(ALLOW_LISTS[kind][0])
