"""C99 variable-length array parameters (`void f(int n, int m, float C[n][m])`), which C++
lacks: in the baseline the parameter becomes a flat pointer and the body's first line
declares the original name as a pointer to rows of the runtime length (a GNU extension
g++ accepts inside a function), so every `C[i][j]` in the body reads as it did. Both
changes carry a marker comment; `restore` undoes them for `export --patch`, so the
original file gets its own declaration back.
"""

from __future__ import annotations

import re

from kernelcrew.kernels.importer.source import Function, Param

PREFIX = "kc_vla_"
_PARAM = re.compile(r"(?<=[(,])(\s*)[^,()]*?\b" + PREFIX + r"\w+\s*/\* kernelcrew VLA: (.*?) \*/")
_PROLOGUE = re.compile(r"[ \t]*[^\n]*/\* kernelcrew VLA \*/[ \t]*\n")


def is_vla(p: Param, sizes: set[str]) -> bool:
    """A parameter whose row length (an extent after the first) is a runtime value."""
    return bool(p.dims) and any(set(re.findall(r"[A-Za-z_]\w*", d)) & sizes for d in p.dims)


def lower(text: str, fn: Function, xfn: Function, sizes: set[str]) -> tuple[str, set[str]]:
    """The function's text (as written) with its VLA parameters lowered; their names."""
    data = text.encode()
    body_at = fn.body_start - fn.start  # byte offsets
    head, body = data[:body_at].decode(), data[body_at:].decode()
    lowered: set[str] = set()
    prologue = []
    for p0, p in zip(fn.params, xfn.params, strict=False):
        if not is_vla(p, sizes) or p0.text not in head:
            continue
        elem = " ".join(re.sub(r"\b(register)\b", "", p.base).split())
        const = "const " if p.const and "const" not in elem else ""
        head = head.replace(p0.text, f"{const}{elem} *{PREFIX}{p.name} /* kernelcrew VLA: "
                                     f"{p0.text} */", 1)
        rows = "".join(f"[{d}]" for d in p.dims)
        prologue.append(f"  {const}{elem} (*{p.name}){rows} = ({const}{elem} (*){rows})"
                        f"{PREFIX}{p.name}; /* kernelcrew VLA */")
        lowered.add(p.name)
    if not lowered:
        return text, lowered
    brace = body.index("{") + 1
    return head + body[:brace] + "\n" + "\n".join(prologue) + body[brace:], lowered


def restore(text: str) -> str:
    """A lowered function back to its original declaration (for the patch)."""
    text = _PROLOGUE.sub("", text)
    return _PARAM.sub(lambda m: m.group(1) + m.group(2), text)
