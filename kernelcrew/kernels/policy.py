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
from kernelcrew.kernels.formats import format_for

CPU_INCLUDES = frozenset({
    "cmath", "cstdint", "cstddef", "cstring", "cstdlib", "algorithm", "limits", "cfloat",
    "climits", "omp.h", "immintrin.h", "math.h", "stdint.h", "stddef.h", "array", "utility",
    "type_traits", "numeric", "assert.h", "cassert", "stdbool.h",
})
CUDA_INCLUDES = frozenset({"cuda_fp16.h", "cuda_bf16.h", "cstdint", "stdint.h", "math.h",
                           "cmath", "cfloat", "climits", "mma.h", "cuda_pipeline.h"})

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

# by a kernel format's `code`: host C++ (a library the worker calls) or device code only
INCLUDES = {"host": CPU_INCLUDES, "device": CUDA_INCLUDES}
RULES = {"host": _CPU_RULES, "device": _CUDA_RULES}


def includes_for(backend: str) -> frozenset[str]:
    """The headers a kernel file of `backend` may include."""
    return INCLUDES[format_for(backend).code]


_RAW_STRING = re.compile(r'(?:u8|u|U|L)?R"([^ ()\\\t\n]{0,16})\(')


def _is_digit_separator(src: str, i: int) -> bool:
    """Whether the `'` at i is a C++14 digit separator (`1'000`), not a character literal."""
    k = i
    while k > 0 and (src[k - 1].isalnum() or src[k - 1] in "_.'"):
        k -= 1
    return k < i and (src[k].isdigit() or (src[k] == "." and k + 1 < i and src[k + 1].isdigit()))


def blank_comments_and_strings(src: str) -> str:
    """Replace comments and string/char literals by spaces, keeping line numbers.

    The result has the same length and the same line breaks as `src`, so positions
    and line numbers carry over. Raw strings (`R"d(...)d"`) and digit separators
    (`1'000`) are read as the compiler reads them. A string or character literal that
    runs into a backslash-newline stops there and leaves the backslash in place, so the
    caller sees (and refuses) the line continuation.
    """
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
        elif (c in "uUL" or c == "R") and (i == 0 or not (src[i - 1].isalnum() or
                                                        src[i - 1] == "_")) \
                and (m := _RAW_STRING.match(src, i)):
            close = ")" + m.group(1) + '"'
            j = src.find(close, m.end())
            j = n if j < 0 else j + len(close)
            out.append("".join(ch if ch == "\n" else " " for ch in src[i:j]))
            i = j
        elif c == "'" and _is_digit_separator(src, i):
            out.append(c)
            i += 1
        elif c in "\"'":
            j = i + 1
            while j < n and src[j] != c and src[j] != "\n":
                if src[j] == "\\":
                    if src.startswith("\n", j + 1) or src.startswith("\r\n", j + 1):
                        break  # backslash-newline: leave it for the continuation check
                    j += 2
                else:
                    j += 1
            closed = j < n and src[j] == c
            j = min(j + 1, n) if closed else j
            # keep the quotes so `#include "x"` is still seen as a quoted include
            out.append(c + " " * max(0, j - i - 2) + (c if closed and j - i >= 2 else
                                                      " " if j - i >= 2 else ""))
            i = j
        else:
            out.append(c)
            i += 1
    return "".join(out)


# Alternative tokens the compiler reads as punctuators: `%:include` is `#include`.
_DIGRAPHS = re.compile(r"%:|<%|%>|<:(?!:[^:>])|:>")
_DIGRAPH_AS = {"%:": "# ", "<%": "{ ", "%>": "} ", "<:": "[ ", ":>": "] "}


def _normalize_digraphs(clean: str) -> str:
    return _DIGRAPHS.sub(lambda m: _DIGRAPH_AS[m.group(0)], clean)


def check_source(body: str, backend: str, *, path: Path | None = None,
                 line_offset: int = 0) -> None:
    """Raise PolicyViolation naming the first line that breaks a rule."""
    code = format_for(backend, path=path).code
    allowed, rules = INCLUDES[code], RULES[code]
    # The compiler joins backslash-continued lines before it reads anything, so a line
    # continuation could glue a directive or a name together where this line-by-line
    # check sees two harmless halves: refuse them outside comments. Digraphs (`%:` for
    # `#`, `<%` for `{`) and line ends (a lone carriage return ends a line too) are
    # read as the compiler reads them.
    body = body.replace("\r\n", "\n").replace("\r", "\n")
    clean = _normalize_digraphs(blank_comments_and_strings(body))
    raw_lines = body.split("\n")
    for no, line in enumerate(clean.split("\n"), start=1 + line_offset):
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
        if line.rstrip().endswith("\\"):
            raise PolicyViolation(f"{where}: line continuation (a backslash at the end of the "
                                  "line) is not allowed", path=path)
        for rx, rule in rules:
            if rx.search(line):
                raise PolicyViolation(f"{where}: {rule}: {line.strip()[:80]!r}", path=path)
    if code == "device":
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
        # attributes ([[nodiscard]]) are not lambda captures
        head = re.sub(r"\[\[.*?\]\]", " ", clean[k + 1: m.start()])
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
