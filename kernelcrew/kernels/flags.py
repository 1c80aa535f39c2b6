"""Allow-lists of optimization flags a kernel file may ask for.

The harness adds target, output, include and linkage flags itself; a kernel file
may only choose how its code is optimized. Anything that reads or writes files
(-include, -o, @file, plugins, -B, specs), defines macros outside knobs, or
changes the ABI is refused.
"""

from __future__ import annotations

import re

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


def check_flags(flags: list[str], backend: str, *, path: object = None) -> list[str]:
    """Return the flags if all are allowed, else raise InputError naming the first bad one."""
    exact, patterns = ALLOW_LISTS[format_for(backend, path=path).flags]
    for f in flags:
        if not isinstance(f, str):
            raise InputError(f"flag {f!r} is not a string", path=path, field="flags")
        if f in exact or any(re.fullmatch(p, f) for p in patterns):
            continue
        raise PolicyViolation(
            f"flag {f!r} is not on the {backend} allow-list of optimization flags; "
            "remove it (the harness sets target, output and include flags itself)",
            path=path, field="flags")
    return list(flags)


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


def allowed_flags(backend: str) -> list[str]:
    return sorted(ALLOW_LISTS[format_for(backend).flags][0])
