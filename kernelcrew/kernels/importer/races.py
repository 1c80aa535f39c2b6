"""A data race old OpenMP code often has: `int i, j, k;` at the top of the function, then
`#pragma omp parallel for` on the i loop, whose inner loops count with j and k. Only the
parallel loop's own counter is private; j and k are shared by every thread. Some
compilers keep them in registers and the results look right; others (clang) do not. The
import says so, so a wrong result from a peer compiler, or from the crew's kernel, is not
taken for a fault of either."""

from __future__ import annotations

import re
from collections.abc import Callable

from kernelcrew.kernels.importer.source import Node, walk

_PARALLEL_FOR = re.compile(r"#\s*pragma\s+omp\s+(?:parallel\s+for|for)\b(.*)", re.DOTALL)
_CLAUSE = re.compile(r"\b(?:private|firstprivate|lastprivate|linear)\s*\(([^)]*)\)"
                     r"|\breduction\s*\([^:]*:([^)]*)\)")


def shared_counters(fn: Node, data: bytes, line_of: Callable[[int], int] = lambda r: r + 1
                    ) -> list[str]:
    """One line per parallel loop whose inner loops count with shared variables;
    `line_of` maps a row of `data` to the file's line."""
    def s(n: Node) -> str:
        return data[n.start_byte:n.end_byte].decode()

    out = []
    for n in walk(fn):
        if n.type not in ("preproc_call", "preproc_pragma") and not s(n).startswith("#"):
            continue
        m = _PARALLEL_FOR.match(s(n).strip())
        loop = n.next_named_sibling
        if m is None or loop is None or loop.type != "for_statement":
            continue
        private = {v.strip() for g in _CLAUSE.findall(m.group(1)) for part in g
                   for v in part.split(",") if v.strip()}
        declared_inside = {s(d) for d in walk(loop) if d.type == "identifier"
                           and d.parent is not None and d.parent.type in
                           ("init_declarator", "declaration")}
        shared = []
        for inner in walk(loop.child_by_field_name("body") or loop):
            if inner.type != "for_statement":
                continue
            init = inner.child_by_field_name("initializer")
            if init is None or init.type != "assignment_expression":
                continue
            var = s(init.child_by_field_name("left"))
            if var not in private and var not in declared_inside and var not in shared:
                shared.append(var)
        if shared:
            out.append(f"line {line_of(loop.start_point.row)}: the loops inside the "
                       f"`#pragma omp` loop count with {', '.join(shared)}, declared outside "
                       "it and not private: every thread shares them (a data race in the "
                       "original; a compiler that keeps them in memory gives wrong results)")
    return out
