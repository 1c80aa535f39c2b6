"""unroll: `#pragma GCC unroll N` (CUDA: `#pragma unroll N`) on innermost loops; an
existing unroll pragma gets the new factor.

Always legal (a hint: the loop means the same unrolled). Refused on loops under an OpenMP
pragma (g++ allows no pragma between it and its loop), loops inside a small-size path or
a `collapse`d nest, and loops that carry the pragma with this factor already.
"""

from __future__ import annotations

import re
from typing import Any

from kernelcrew.agents.transforms.analysis.common import (
    collapsed,
    finish,
    has_pragma,
    in_small_path,
)
from kernelcrew.agents.transforms.kernel_files import Outcome, each_entry
from kernelcrew.csource.affine import FunctionModel
from kernelcrew.csource.syntax import (
    Edit,
    Source,
    find_function,
    functions,
    insert_lines_before,
    pragma_text,
    pragmas_before,
    remove_lines,
)
from kernelcrew.kernels.kernelfile import KernelFile


def unroll(src: str, factor: int, entry: str | None = None, *, style: str = "gcc"
           ) -> str | None:
    """`#pragma GCC unroll N` (CUDA: `#pragma unroll N`) on innermost loops of `entry`
    (every function when None); an existing unroll pragma gets the new factor. Loops under an
    OpenMP pragma are left alone (g++ allows no pragma between it and the loop)."""
    s = Source(src)
    if entry is None:

        fns = functions(s)
    else:
        fn = find_function(s, entry)
        fns = [fn] if fn is not None else []
    word = "GCC unroll" if style == "gcc" else "unroll"
    edits: list[Edit] = []
    for fn in fns:
        m = FunctionModel(s, fn)
        for lp in m.loops:
            if lp.children or not lp.canonical or has_pragma(s, lp, r"^omp\b") or \
                    in_small_path(lp.node) or collapsed(s, lp):
                continue  # g++ allows nothing between an OpenMP pragma and its loop
            existing = [p for p in pragmas_before(lp.node)
                        if re.match(r"(GCC\s+)?unroll\b", pragma_text(s, p))]
            if existing:
                if pragma_text(s, existing[0]) == f"{word} {factor}":
                    continue
                edits += remove_lines(s, existing)
                edits.append(Edit(s.line_start(lp.node), s.line_start(lp.node),
                                  f"#pragma {word} {factor}\n"))
                continue
            edits += insert_lines_before(s, lp.node, [f"#pragma {word} {factor}"])
    return finish(s, edits)


def unroll_in_file(kf: KernelFile, p: dict[str, Any]) -> Outcome | None:
    """The unroll move on a kernel file: GCC's pragma on the CPU, nvcc's on CUDA."""
    style = "gcc" if kf.backend == "cpu" else "nv"
    return each_entry(kf, lambda s, e: unroll(s, int(p["factor"]), e, style=style))


WHY_NOT = "every innermost loop carries an unroll or OpenMP pragma"
