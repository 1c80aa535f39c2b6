"""compiler: the same kernel built by another compiler (clang++, or clang++ with Polly's
polyhedral optimizer), with that compiler's own flags.

The code does not change, so the move is legal wherever the kernel builds; it is refused
(not offered, with the reason) where:
- the compiler is not installed (the reason names it and the package);
- Polly is asked for and the clang++ found lacks it;
- the kernel has OpenMP threading pragmas and the build would not thread them: clang++
  builds against GCC's libgomp (one OpenMP runtime per worker), for which it has no
  OpenMP code generation, so it compiles `omp parallel` as serial code; only Polly's own
  `-polly-parallel` threads loops there;
- the kernel already builds with that compiler and those flags.
The flags are the compiler's ladder (`LADDERS`) plus the math flags of the current list
that the new compiler also accepts (`-fno-math-errno`, `-ffast-math`, ...)."""

from __future__ import annotations

import re
from typing import Any

from kernelcrew.agents.transforms.kernel_files import Outcome
from kernelcrew.errors import InputError
from kernelcrew.kernels.flags import (
    POLLY,
    POLLY_PARALLEL,
    check_flags,
    compiler_family,
    find_compiler,
    has_polly,
)
from kernelcrew.kernels.kernelfile import KernelFile

# the first rung of each compiler's flags; the compiler_flags specialist climbs from there
LADDERS: dict[str, list[str]] = {
    "g++": ["-O3", "-march=native"],
    "clang++": ["-O3", "-march=native"],
    "polly": ["-O3", "-march=native", POLLY, POLLY_PARALLEL,
              "-mllvm=-polly-vectorizer=stripmine"],
}
_KEEP = re.compile(r"^-f(no-math-errno|fast-math|no-trapping-math|associative-math|"
                   r"reciprocal-math|no-signed-zeros|fp-contract=\w+|unroll-loops)$|"
                   r"^-mprefer-vector-width=")
_THREADS = re.compile(r"#\s*pragma\s+omp\s+(parallel|for|task|single|critical|atomic|"
                      r"barrier|sections)\b")
PACKAGES = "Debian: apt-get install clang-19 libpolly-19-dev libomp-19-dev"


def _target(p: dict[str, Any]) -> tuple[str, bool]:
    return str(p.get("cc") or "clang++"), bool(p.get("polly"))


def refusal(kf: KernelFile, name: str, polly: bool) -> str | None:
    """Why `kf` cannot be built by `name` (with Polly): None when it can."""
    exe = find_compiler(name)
    if exe is None:
        return f"{name} is not installed ({PACKAGES})"
    if polly and (compiler_family(name) != "clang++" or not has_polly(exe)):
        return f"{exe} has no Polly ({PACKAGES})"
    if compiler_family(name) == "clang++" and not polly and _THREADS.search(kf.body):
        return ("the kernel has OpenMP threading pragmas, which clang++ compiles as serial "
                "code when it builds against GCC's libgomp (only Polly's -polly-parallel "
                "threads there)")
    return None


def compiler_in_file(kf: KernelFile, p: dict[str, Any]) -> Outcome | None:
    """Build with compiler `cc` (with Polly when `polly`), flags `flags` (default: the
    ladder's first rung) plus the math flags of the current list it accepts."""
    name, polly = _target(p)
    if refusal(kf, name, polly) is not None:
        return None
    ladder = list(p.get("flags") or LADDERS["polly" if polly else compiler_family(name)])
    kept = [f for f in kf.meta.flags if _KEEP.match(f) and f not in ladder]
    flags = ladder + kept
    try:
        check_flags(flags, "cpu", compiler=name)
    except InputError:  # a flag the compiler does not take: not this move
        return None
    same = (kf.meta.compiler or "g++") == name and sorted(kf.meta.flags) == sorted(flags)
    return None if same else Outcome(compiler=name, flags=flags)


def why_not(kf: KernelFile) -> str:
    """Why neither clang++ nor clang++ with Polly can build this kernel."""
    plain = refusal(kf, "clang++", False)
    polly = refusal(kf, "clang++", True)
    if plain is None or polly is None:
        return "the kernel builds with that compiler and those flags already"
    return f"clang++: {plain}; with Polly: {polly}"
