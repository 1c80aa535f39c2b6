"""Unroll-and-jam of reduction nests: register tiling of dot-product loops.

A dot-product nest computes one output per iteration of an outer loop with an inner
reduction over a private accumulator:

    for (int o = 0; o < OC; o++) {
        float val = bias[o];                       // set-up: no loops, no calls with effects
        for (int i = 0; i < C; i++) {
            val += inp[bt * C + i] * weight[o * C + i];
        }
        out[bt * OC + o] = val;                    // wrap-up
    }

Jammed by U, U outputs are computed by one pass of the inner loop: U accumulators (one
vector register each under `omp simd reduction`), every element that does not depend on
`o` (here `inp[bt*C + i]`) is loaded once for U multiply-adds, and U independent chains hide
the FP-add latency. Leftover outer iterations (OC % U) run the original body.

The same jam takes a loop that adds rows into one vector (`for i { xi = x[i]; for j
y[j] += a[i * n + j] * xi; }`, a transposed mat-vec, the weighted values of attention):
the jammed inner loop adds U rows into each y[j] in their order, so y is loaded and stored
once per U rows.

Legal when the inner loop's bounds do not depend on the outer variable and the outer
iterations are independent (`check_loop` without reductions: each writes its own
elements, reads nothing another writes) but for what the jam keeps in order (`analysis.dot_nests`):
scalars that only the set-up, or only the wrap-up, mentions (a running maximum of the
scores, `denom += p`), whose copies run one after the other as the iterations did, and
arrays that only the inner loop touches, at one subscript that does not change with the
outer loop (y[j] above). Each accumulator still sums its terms in the original order
(the inner loop's `omp simd` reduction reassociates them, as `simd` would); each element
of an updated array receives its rows' terms in the original order. Offered only
where the inner loop's reads are unit-stride or invariant in its variable (otherwise the
vectorized inner loop would gather: interchange is the move there).

The jammed loop is written in OpenMP's canonical form (`for (i = a; i < i_jam; i += U)`,
the leftover iterations from `i_jam` on), so an `omp parallel for` the outer loop carried
stays on it: groups of U independent iterations are as independent as the iterations
were. Its clauses must mean the same on groups (schedule, num_threads, if, proc_bind,
default); any other OpenMP pragma on the loop (a reduction, private copies, a bare `omp
for` whose leftover iterations every thread of the team would run) refuses the jam.
"""

from __future__ import annotations

from kernelcrew.agents.transforms.analysis.body_copies import (
    JAM_MARK,
    body_locals,
    copy_suffix,
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
from kernelcrew.agents.transforms.analysis.dependence import (
    check_loop,
)
from kernelcrew.agents.transforms.analysis.dot_nests import jam_reason
from kernelcrew.agents.transforms.analysis.openmp import reduced_names, worksharing
from kernelcrew.agents.transforms.reasons import per_entry
from kernelcrew.csource.affine import FunctionModel
from kernelcrew.csource.syntax import (
    Edit,
    Loop,
    Node,
    Source,
    pragmas_before,
    walk,
)
from kernelcrew.kernels.kernelfile import KernelFile


def _jam_once(s: Source, m: FunctionModel, factor: int) -> str | None:
    for lp in m.loops:
        if in_small_path(lp.node) or collapsed(s, lp) or jam_reason(m, lp) is not None:
            continue
        if s.text_of(lp.node.parent).startswith("{  " + JAM_MARK):
            continue  # one of ours
        inner = lp.children[0]
        # locals declared in the outer body (set-up, the inner body; not the inner counter)
        locals_ = body_locals(lp.body, inner.decl)
        taken = {n.text.decode() for n in walk(m.fn) if n.type == "identifier"}
        sep = copy_suffix([key.split("@")[0] for key in locals_], factor, taken)
        if sep is None:
            continue  # the copies' names are taken
        red = check_loop(m, inner, allow_reductions=True).reductions
        stmts = statements(lp.body)
        pre = [st for st in stmts if st.end_byte <= inner.node.start_byte
               and st.type != "preproc_call"]
        post = [st for st in stmts if st.start_byte >= inner.node.end_byte]
        ind = s.indent_of(lp.node)
        st1 = ind + "    "
        st2 = st1 + "    "
        st3 = st2 + "    "
        copies = range(factor)

        def copy(st: Node, k: int, lp: Loop = lp, keys: set[str] = locals_,
                 sep: str = sep) -> str:
            return rename_copy(m, st, lp, k, f"({lp.var} + {k})" if k else None, keys, sep)

        pre_txt = "".join(f"{st2}{copy(st, k)}\n" for k in copies for st in pre)
        post_txt = "".join(f"{st2}{copy(st, k)}\n"
                           for k in copies for st in post)
        body_stmts = statements(inner.body)
        body_txt = folded_copies(body_stmts, copies, copy, st3) or "".join(
            f"{st3}{copy(st, k)}\n" for k in copies for st in body_stmts)
        names = [f"{r}{sep}{k}" if k else r for r in red for k in copies]
        ih = s.data[inner.node.start_byte:inner.body.start_byte].decode().rstrip()
        simd = f"#pragma omp simd reduction(+ : {', '.join(names)})\n" if names else \
            "#pragma omp simd\n"
        head = jam_header(s, m, lp, factor, taken)
        if head is None:
            continue
        var, init, start, end, lim, cmp, lim_text = head
        orig_body = s.text_of(lp.body).replace("\n", "\n    ")
        # the main loop in OpenMP's canonical form (`for (v = a; v < b; v += F)`), so a
        # `parallel for` it carried stays on it; the leftover iterations start at its end
        par = worksharing(s, lp, reductions=bool(reduced_names(s, lp)))
        text = (
            f"{{  {JAM_MARK} {factor}\n"
            f"{st1}{lim_text}\n"
            + (f"#pragma {par}\n" if par else "") +
            f"{st1}for ({init} = {start}; {var} < {lim}; {var} += {factor}) {{\n"
            f"{pre_txt}"
            f"{simd}"
            f"{st2}{ih} {{\n{body_txt}{st2}}}\n"
            f"{post_txt}"
            f"{st1}}}\n"
            f"{st1}for ({init} = {lim}; {var} {cmp} {end}; ++{var}) {orig_body}\n"
            f"{ind}}}"
        )
        # the jammed loop's own pragmas (unroll hints; a kept `parallel for` is put back
        # on the main loop above) do not apply to the new loops
        at = pragmas_before(lp.node)
        start_b = s.line_start(at[0]) if at else lp.node.start_byte
        return finish(s, [Edit(start_b, lp.node.end_byte, (ind if at else "") + text)])
    return None


def unroll_and_jam(src: str, entry: str, factor: int = 4) -> str | None:
    """Jam every dot-product nest of `entry` by `factor` (see the module docstring)."""
    if factor < 2:
        return None
    got = model_of(src, entry)
    if got is None:
        return None
    return repeat(src, entry, lambda s, m: _jam_once(s, m, factor))


def jam_reasons(src: str, entry: str) -> list[str]:
    """Why no loop of `entry` can be jammed, one reason per 2-deep nest."""
    got = model_of(src, entry)
    if got is None:
        return []
    _, m = got
    out = []
    for lp in m.loops:
        if lp.children and not any(c.children for c in lp.children):
            r = jam_reason(m, lp)
            if r is not None:
                out.append(r)
    return out


def why_not(kf: KernelFile) -> str:
    return per_entry(kf, jam_reasons, "no 2-deep nest with an inner reduction")
