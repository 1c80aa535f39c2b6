"""Static rules for untrusted kernel sources, checked before any compiler sees them.

A kernel file may include only a short list of system headers (so no file content
of the host can reach a log or a model), and a CUDA file must be device code only:
no host functions, inline assembly, clock or global-timer reads, device-side
launches or printf. Each violation names the line and the rule.
"""

from __future__ import annotations

import re
from pathlib import Path

from kernelcrew.errors import PolicyViolation

CPU_INCLUDES = frozenset({
    "cmath", "cstdint", "cstddef", "cstring", "cstdlib", "algorithm", "limits", "cfloat",
    "climits", "omp.h", "immintrin.h", "math.h", "stdint.h", "stddef.h", "array", "utility",
    "type_traits", "numeric",
})
CUDA_INCLUDES = frozenset({"cuda_fp16.h", "cuda_bf16.h", "cstdint", "stdint.h", "math.h",
                           "cmath", "cfloat", "climits"})

_INCLUDE = re.compile(r"^\s*#\s*(include|include_next|import|embed)\b(.*)$")
_CPU_RULES = [
    (re.compile(r"\b(asm|__asm__|__asm)\b"), "inline assembly is not allowed"),
    (re.compile(r"__has_include|__has_embed"), "probing for host files is not allowed"),
    (re.compile(r"^\s*#\s*line\b"), "#line directives are not allowed"),
    (re.compile(r"\b(fopen|open|openat|creat|socket|connect|system|popen|execv\w*|fork|"
                r"dlopen|syscall|mmap|ptrace|kill|pthread_create|getenv|unlink|remove|rename)"
                r"\s*\("), "system calls are not allowed in a kernel"),
]
_CUDA_RULES = [
    (re.compile(r"\b(asm|__asm__|__asm)\b"), "inline assembly (asm) is not allowed"),
    (re.compile(r"\bclock(64)?\s*\(|%globaltimer|\b__globaltimer|\bglobaltimer\b"),
     "clock and global-timer reads are not allowed"),
    (re.compile(r"<<<"), "device-side kernel launches (dynamic parallelism) are not allowed"),
    (re.compile(r"\bcudaLaunch\w*|\bcudaGetParameterBuffer\w*|\bcudaDeviceSynchronize\b"),
     "device-side launches (dynamic parallelism) are not allowed"),
    (re.compile(r"\b(printf|vprintf)\s*\("), "device-side printf is not allowed"),
    (re.compile(r"\b(malloc|free|__nanosleep)\s*\("), "device malloc/free/sleep are not allowed"),
    (re.compile(r"\bcuda[A-Z]\w*\s*\("), "CUDA runtime API calls (host code) are not allowed"),
    (re.compile(r"\b__host__\b"), "host code (__host__) is not allowed: device code only"),
    (re.compile(r"\bint\s+main\s*\("), "host code (main) is not allowed: device code only"),
    (re.compile(r"__has_include|__has_embed"), "probing for host files is not allowed"),
    (re.compile(r"^\s*#\s*line\b"), "#line directives are not allowed"),
    (re.compile(r"\b(fopen|std::|system|popen)\b"), "host library code is not allowed"),
]


def blank_comments_and_strings(src: str) -> str:
    """Replace comments and string/char literals by spaces, keeping line numbers."""
    out = []
    i, n = 0, len(src)
    while i < n:
        c = src[i]
        if src.startswith("//", i):
            j = src.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif src.startswith("/*", i):
            j = src.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append("".join(ch if ch == "\n" else " " for ch in src[i:j]))
            i = j
        elif c in "\"'":
            j = i + 1
            while j < n and src[j] != c and src[j] != "\n":
                j += 2 if src[j] == "\\" else 1
            j = min(j + 1, n)
            # keep the quotes so `#include "x"` is still seen as a quoted include
            out.append(c + " " * max(0, j - i - 2) + (src[j - 1] if j - i >= 2 else ""))
            i = j
        else:
            out.append(c)
            i += 1
    return "".join(out)


def check_source(body: str, backend: str, *, path: Path | None = None,
                 line_offset: int = 0) -> None:
    """Raise PolicyViolation naming the first line that breaks a rule."""
    allowed = CPU_INCLUDES if backend == "cpu" else CUDA_INCLUDES
    rules = _CPU_RULES if backend == "cpu" else _CUDA_RULES
    # Line continuations could glue a directive together across lines: refuse them on
    # preprocessor lines outright.
    clean = blank_comments_and_strings(body)
    raw_lines = body.splitlines()
    for no, line in enumerate(clean.splitlines(), start=1 + line_offset):
        where = f"line {no}"
        m = _INCLUDE.match(line)
        if m:
            raw = raw_lines[no - 1 - line_offset].strip()
            target = re.search(r"<\s*([A-Za-z0-9_./]+)\s*>", raw)
            if m.group(1) != "include" or not target or target.group(1) not in allowed:
                raise PolicyViolation(
                    f"{where}: include {raw!r} refused: only <{'>, <'.join(sorted(allowed))}> "
                    "may be included (no host files)", path=path)
            continue
        if line.rstrip().endswith("\\") and line.lstrip().startswith("#"):
            raise PolicyViolation(f"{where}: line continuation in a preprocessor directive "
                                  "is not allowed", path=path)
        for rx, rule in rules:
            if rx.search(line):
                raise PolicyViolation(f"{where}: {rule}: {line.strip()[:80]!r}", path=path)
    if backend == "cuda":
        _check_device_only(clean, path, line_offset)


_CALL_OPEN = re.compile(r"\b([A-Za-z_]\w*)\s*\(")
_NOT_FUNCS = {"if", "for", "while", "switch", "catch", "return", "sizeof", "alignof", "decltype",
              "static_assert", "__launch_bounds__", "__align__", "alignas", "defined"}


def _check_device_only(clean: str, path: Path | None, line_offset: int) -> None:
    """Every function definition, at any depth, must be __global__ or __device__."""
    # preprocessor lines are not code
    clean = "\n".join("" if ln.lstrip().startswith("#") else ln for ln in clean.split("\n"))
    for m in _CALL_OPEN.finditer(clean):
        name = m.group(1)
        if name in _NOT_FUNCS:
            continue
        # find the matching close paren
        depth, j = 0, m.end() - 1
        while j < len(clean):
            if clean[j] == "(":
                depth += 1
            elif clean[j] == ")":
                depth -= 1
                if depth == 0:
                    break
            j += 1
        after = clean[j + 1: j + 200]
        tail = re.match(r"\s*(const\s*)?(noexcept\s*)?(->\s*[\w:<>\s\*&]+)?\{", after)
        if not tail:
            continue
        k = max(clean.rfind(c, 0, m.start()) for c in ";{}")
        head = clean[k + 1: m.start()]
        if "=" in head or re.search(r"\breturn\b|\]", head) or not head.strip():
            continue  # an expression or lambda, not a definition
        if re.search(r"\b(__global__|__device__)\b", head):
            continue
        if re.search(r"\b(struct|class|union|namespace|enum)\s*$", head.strip()):
            continue
        line = clean.count("\n", 0, m.start(1)) + 1 + line_offset
        raise PolicyViolation(
            f"line {line}: host code is not allowed: function {name!r} is neither "
            "__global__ nor __device__ (the harness owns all host work)", path=path)
