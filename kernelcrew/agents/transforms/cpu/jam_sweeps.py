"""jam_sweeps: several rows of a row sweep at once (unroll-and-jam of an outer loop whose
body runs several inner loops, or one that both reduces and updates).

A row sweep reads each row of a matrix in one or more inner loops: A^T(Ax) computes a dot
product of the row and adds the row into a vector; two mat-vecs sharing A do both in one
inner loop; alpha A x + beta B x takes two dot products per row. Jammed by U, each inner
loop runs once for U rows: the vector it reads (x) is loaded once for U rows, the vector
it updates (y) is loaded and stored once for U rows, and U independent sums hide the
add latency:

    for (i = 0; i < i_jam; i += 4) {
        double t = 0, t_1 = 0, ...;                 // the set-up, row by row
        #pragma omp simd reduction(+ : t, t_1, t_2, t_3)
        for (j = 0; j < n; j++) { t += A[i][j] * x[j]; t_1 += A[i + 1][j] * x[j]; ... }
        tmp[i] = t; tmp[i + 1] = t_1; ...           // the wrap-up, row by row
        #pragma omp simd
        for (j = 0; j < n; j++) y[j] = (((y[j] + A[i][j] * tmp[i]) + ...) + ...);
    }
    for (i = i_jam; i < m; ++i) { the body as it was }

Legal (`analysis.sweeps.sweep_plan`) when the outer loop is a unit-step countable loop
whose body is plain statements (no loops, no control flow, pure calls) and innermost
loops over a range fixed before it; its iterations are independent but for arrays that
one inner loop alone touches, at one offset free of the outer variable (each element
then receives the rows' updates in the original order); every inner loop is independent
apart from sums into locals of a row (the `omp simd reduction` reassociates each sum, as
`simd` does); no scalar declared outside is written; an `omp parallel for` on the loop is
kept where its clauses mean the same on groups of rows. Offered only where each inner
loop reads with unit stride or not at all along its variable (a strided read would be
gathered for every copy: interchange is the move there), and not where `unroll_and_jam`
takes the loop (one inner dot product): this is its extension to sweeps."""

from __future__ import annotations

from kernelcrew.agents.transforms.analysis.body_copies import (
    JAM_MARK,
    copy_suffix,
    folded_body,
    folded_copies,
    jam_header,
    rename_copy,
)
from kernelcrew.agents.transforms.analysis.common import (
    collapsed,
    finish,
    in_small_path,
    model_of,
    repeat,
    statements,
)
from kernelcrew.agents.transforms.analysis.dot_nests import jam_reason
from kernelcrew.agents.transforms.analysis.openmp import reduced_names, worksharing
from kernelcrew.agents.transforms.analysis.sweeps import SweepPlan, sweep_plan
from kernelcrew.agents.transforms.reasons import per_entry
from kernelcrew.agents.transforms.views import canonical
from kernelcrew.csource.affine import FunctionModel
from kernelcrew.csource.syntax import Edit, Loop, Node, Source, pragmas_before, walk
from kernelcrew.kernels.kernelfile import KernelFile


def _rewrite(s: Source, m: FunctionModel, lp: Loop, plan: SweepPlan, factor: int
             ) -> str | None:
    taken = {n.text.decode() for n in walk(m.fn) if n.type == "identifier"}
    sep = copy_suffix([k.split("@")[0] for k in plan.locals_], factor, taken)
    head = jam_header(s, m, lp, factor, taken)
    if sep is None or head is None:
        return None
    var, init, start, end, lim, cmp, lim_text = head
    ind = s.indent_of(lp.node)
    st1, st2, st3 = ind + "    ", ind + "        ", ind + "            "
    copies = range(factor)

    def copy(st: Node, k: int) -> str:
        return rename_copy(m, st, lp, k, f"({var} + {k})" if k else None, plan.locals_, sep)

    lines: list[str] = []
    run: list[Node] = []

    def flush() -> None:
        lines.extend(f"{st2}{copy(st, k)}" for k in copies for st in run)
        run.clear()

    for seg in plan.segments:
        if not isinstance(seg, Loop):
            run.append(seg)
            continue
        flush()
        sums = [f"{r}{sep}{k}" if k else r for r in plan.reductions[seg.node.start_byte]
                for k in copies]
        lines.append("#pragma omp simd" + (f" reduction(+ : {', '.join(sums)})" if sums
                                           else ""))
        header = s.data[seg.node.start_byte:seg.body.start_byte].decode().rstrip()
        body = statements(seg.body)
        text = folded_copies(body, copies, copy, st3) or \
            folded_body(body, copies, copy, st3) or "".join(
            f"{st3}{copy(st, k)}\n" for k in copies for st in body)
        lines.append(f"{st2}{header} {{\n{text.rstrip(chr(10))}\n{st2}}}")
    flush()
    par = worksharing(s, lp, reductions=bool(reduced_names(s, lp)))
    orig_body = s.text_of(lp.body).replace("\n", "\n    ")
    text = (f"{{  {JAM_MARK} {factor}\n{st1}{lim_text}\n"
            + (f"#pragma {par}\n" if par else "")
            + f"{st1}for ({init} = {start}; {var} < {lim}; {var} += {factor}) {{\n"
            + "\n".join(lines) + f"\n{st1}}}\n"
            + f"{st1}for ({init} = {lim}; {var} {cmp} {end}; ++{var}) {orig_body}\n{ind}}}")
    at = pragmas_before(lp.node)
    start_b = s.line_start(at[0]) if at else lp.node.start_byte
    return finish(s, [Edit(start_b, lp.node.end_byte, (ind if at else "") + text)])


def _jam_once(s: Source, m: FunctionModel, factor: int) -> str | None:
    for lp in m.loops:
        if in_small_path(lp.node) or collapsed(s, lp) or jam_reason(m, lp) is None:
            continue
        if s.text_of(lp.node.parent).startswith("{  " + JAM_MARK):
            continue  # one of ours
        plan = sweep_plan(m, lp)
        if isinstance(plan, SweepPlan):
            out = _rewrite(s, m, lp, plan, factor)
            if out is not None:
                return out
    return None


def jam_sweeps(src: str, entry: str, factor: int = 4) -> str | None:
    """Jam every row sweep of `entry` by `factor` (see the module docstring)."""
    if factor < 2 or model_of(src, entry) is None:
        return None
    return repeat(src, entry, lambda s, m: _jam_once(s, m, factor))


def sweep_reasons(src: str, entry: str) -> list[str]:
    """Why no loop of `entry` is a row sweep to jam, one reason per loop holding loops, on
    the most rewritten view of the function (the form the move is tried on last)."""
    got = model_of(canonical(src, entry), entry)
    if got is None:
        return []
    _, m = got
    out = []
    for lp in m.loops:
        if lp.children and not any(c.children for c in lp.children):
            plan = sweep_plan(m, lp)
            if isinstance(plan, str):
                out.append(plan)
    return out


def why_not(kf: KernelFile) -> str:
    return per_entry(kf, sweep_reasons, "no loop whose body is plain statements and "
                                        "innermost loops")
