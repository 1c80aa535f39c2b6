"""simd: `#pragma omp simd` (with reduction clauses) on innermost loops.

Legal on a countable innermost loop whose iterations are independent apart from
recognized reductions into scalars (+, *, max, min; also written as chains, `s = s + a*b +
c*d`, and the `if (x > m) m = x;` form, rewritten to a max): `analysis.dependence.check_loop`
with reductions allowed. A float reduction is reassociated (the verifier checks it
against the op's tolerance). Refused on loops that store with a stride other than one
element (a vector scatter costs more than scalar stores), loops that already carry `omp
simd`, loops inside a small-size path or a `collapse`d nest, and loops that run a short
constant count (below 8: -O3 unrolls them whole). An unroll pragma on the loop is dropped
(g++ allows no pragma between `omp simd` and its loop); a `parallel for` on the same loop
becomes the combined `parallel for simd`.
"""

from __future__ import annotations

import re

from kernelcrew.agents.transforms.analysis.common import (
    collapsed,
    finish,
    has_pragma,
    in_small_path,
    model_of,
    reduction_clauses,
    short_constant_loop,
)
from kernelcrew.agents.transforms.analysis.dependence import check_loop
from kernelcrew.agents.transforms.reasons import entry_models, first_reasons
from kernelcrew.csource.affine import FunctionModel, split_terms
from kernelcrew.csource.syntax import (
    Edit,
    Loop,
    Source,
    insert_lines_before,
    pragma_text,
    pragmas_before,
    remove_lines,
    walk,
)
from kernelcrew.kernels.kernelfile import KernelFile

# ---------------------------------------------------------------- restrict


# ---------------------------------------------------------------- OpenMP simd

def omp_simd_inner(src: str, entry: str) -> str | None:
    """`#pragma omp simd` (with reduction clauses) on every innermost loop whose iterations
    are independent apart from recognized reductions. Loops that store with a non-unit
    stride are left alone (vector scatters cost more than scalar stores). An unroll pragma
    on a loop that gets simd is dropped (g++ refuses any pragma between the two)."""
    got = model_of(src, entry)
    if got is None:
        return None
    s, m = got
    edits: list[Edit] = []
    for lp in m.loops:
        if lp.children or not lp.canonical or has_pragma(s, lp, r"^omp\b.*\bsimd\b") or \
                in_small_path(lp.node) or collapsed(s, lp) or short_constant_loop(s, m, lp):
            continue
        v = check_loop(m, lp, allow_reductions=True)
        if not v.ok or _scatters(m, lp):
            continue
        clauses = reduction_clauses(v.reductions, [pragma_text(s, p)
                                                   for p in pragmas_before(lp.node)])
        # g++ accepts no other pragma between `omp simd` and its loop: an unroll pragma goes
        edits += remove_lines(s, [p for p in pragmas_before(lp.node)
                                  if re.match(r"(GCC\s+)?unroll\b", pragma_text(s, p))])
        worksharing = next((p for p in pragmas_before(lp.node)
                            if re.match(r"omp\s+(parallel\s+)?for\b", pragma_text(s, p))), None)
        if worksharing is not None:
            # the threaded loop is also the innermost one: the combined `for simd` construct
            arg = worksharing.child_by_field_name("argument")
            text = re.sub(r"\bfor\b", "for simd", pragma_text(s, worksharing), count=1)
            edits.append(Edit(arg.start_byte, arg.end_byte, text + clauses))
        else:
            edits += _insert_first(s, lp, f"#pragma omp simd{clauses}")
        for node, text in v.rewrites:
            edits.append(Edit(node.start_byte, node.end_byte, text))
    return finish(s, edits)


def _scatters(m: FunctionModel, lp: Loop) -> bool:
    """Whether the loop stores to an array with a stride other than one element."""
    for n in walk(lp.body):
        p = n.parent
        if n.type != "subscript_expression" or p is None or \
                p.type != "assignment_expression" or p.child_by_field_name("left") != n:
            continue
        acc = m.subscript(n, lp.node)
        sp = split_terms(acc[1]) if acc is not None and acc[1] is not None else None
        coef = sp[0].get(lp.key) if sp is not None else None
        if coef is not None and coef != {(): 1}:
            return True
    return False


def _insert_first(s: Source, lp: Loop, line: str) -> list[Edit]:
    """Insert a pragma line before a loop, above any pragmas already attached to it."""
    prag = pragmas_before(lp.node)
    anchor = prag[0] if prag else lp.node
    if prag:
        start = s.line_start(anchor)
        return [Edit(start, start, line + "\n")]
    return insert_lines_before(s, lp.node, [line])


# ---------------------------------------------------------------- unroll



def why_not(kf: KernelFile) -> str:
    """Why simd does not apply: per innermost loop, its pragma, its short constant trip
    count, or its dependence."""
    reasons = []
    for name, s, m in entry_models(kf):
        for lp in m.loops:
            if lp.children:
                continue
            if has_pragma(s, lp, r"^omp\b.*\bsimd\b"):
                reasons.append(f"{name}(): the loop at line {s.line_of(lp.node)} has omp simd")
                continue
            if (short := short_constant_loop(s, m, lp)) is not None:
                reasons.append(f"{name}(): {short}")
                continue
            v = check_loop(m, lp, allow_reductions=True)
            if not v.ok:
                reasons.append(f"{name}(): {v.reason}")
    return first_reasons(reasons, "no innermost loop")
