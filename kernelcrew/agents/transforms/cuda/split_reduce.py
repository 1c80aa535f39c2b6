"""split_reduce: a long reduction per thread split over the block's y threads.

A kernel with one output per thread (`T j = blockIdx.x*blockDim.x + threadIdx.x;` and its
guard) whose work is declarations, one reduction loop (`for (q = a; q < b; ++q) acc +=
...;`, also max/min) and statements that use the result: when neighbouring threads
already read neighbouring addresses (a column sum, a transposed mat-vec), one thread per
block row is all that is wrong: there are too few threads, each walking a long loop.
Rewritten: blocks of [SPLIT_X, SPLIT_Y] threads; thread (x, y) takes every SPLIT_Y-th step
of the loop from a + y (each step still coalesced across x), the partial results meet in
shared memory, and the y = 0 thread combines them in order of y and finishes the output.
The launch grid becomes the outputs over SPLIT_X.

Legal when the loop's iterations are independent apart from the reductions (the CPU's
dependence analysis, `check_loop`), a `+` reduction starts from 0 (every y thread starts
a partial sum from the initializer), the declarations before the loop read no memory (all
threads, in range or not, run them: they must reach the barrier), and nothing else in the
work depends on the thread. Refused otherwise, and when a launch is not 1-D.
"""

from __future__ import annotations

import re
from typing import Any

from kernelcrew.agents.transforms.analysis.cuda_shapes import blocker, dedent_block, per_index
from kernelcrew.agents.transforms.analysis.dependence import check_loop
from kernelcrew.agents.transforms.kernel_files import Outcome, entries
from kernelcrew.csource.affine import FunctionModel
from kernelcrew.csource.syntax import (
    Edit,
    Source,
    apply_edits,
    declarators,
    find_function,
    loops_in,
    params,
    walk,
)
from kernelcrew.kernels.kernelfile import KernelFile

_OPS = {"+": "+", "max": "max", "min": "min"}
_ZERO = re.compile(r"^\(?\s*(0|0\.0*|0\.0*f|0\.f|0f|0\.0*F|0L|0LL|0u)\s*\)?$")


def _parts(s: Source, kernel: str):
    """(the per-output shape, the loop, its reductions, the statements before and after
    it, the reduced values' types), or why the kernel is not of the form."""
    pi = per_index(s, kernel)
    if pi is None:
        return "not one output per thread (blockIdx.x*blockDim.x + threadIdx.x)"
    why = blocker(s, pi.stmts, pi.var)
    if why is not None:
        return f"the work {why}"
    loops = [st for st in pi.stmts if st.type == "for_statement"]
    if len(loops) != 1:
        return "not one reduction loop in the per-output work"
    lp_node = loops[0]
    m = FunctionModel(s, pi.fn)
    lp = next(x for x in loops_in(pi.fn.child_by_field_name("body"))
              if x.node.start_byte == lp_node.start_byte)
    if not lp.canonical or lp.step is not None or lp.inclusive:
        return "the reduction loop is not `for (q = a; q < b; ++q)`"
    v = check_loop(m, lp, allow_reductions=True)
    if not v.ok or not v.reductions:
        return "the loop is not a reduction with independent iterations"
    if any(op not in _OPS for op in v.reductions.values()):
        return "a reduction that is not a sum, max or min"
    pre = [st for st in pi.stmts if st.start_byte < lp_node.start_byte]
    post = [st for st in pi.stmts if st.start_byte > lp_node.start_byte]
    types = {}
    for st in pre:
        if st.type != "declaration":
            return "statements before the loop that are not declarations"
        for n in walk(st):
            if n.type in ("subscript_expression", "call_expression") or \
                    (n.type == "pointer_expression" and
                     n.child_by_field_name("operator").type == "*"):
                return ("a declaration before the loop reads memory (threads past "
                              "the end run it too)")
        for name, init, ptr, arr in declarators(st):
            if name in v.reductions:
                if ptr or arr or len(list(declarators(st))) != 1:
                    return f"{name} is declared with other names"
                if v.reductions[name] == "+" and (init is None or
                                                 not _ZERO.match(s.text_of(init).strip())):
                    return f"the sum {name} does not start at 0"
                types[name] = s.text_of(st.child_by_field_name("type")).strip()
    if set(types) != set(v.reductions):
        return "a reduced value is not declared before the loop"
    if any(n.type == "identifier" and n.text.decode().startswith("kc_") for n in walk(pi.fn)):
        return "names starting with kc_ are taken"
    return pi, lp, lp_node, v, pre, post, types


def split(src: str, kernel: str) -> tuple[str | None, str]:
    """(the rewritten source, the guard's bound) or (None, why not)."""
    s = Source(src)
    got = _parts(s, kernel)
    if isinstance(got, str):
        return None, got
    pi, lp, lp_node, v, pre, post, types = got
    # the rewrite
    start, upd = lp.start, lp_node.child_by_field_name("update")
    cond = lp_node.child_by_field_name("condition")
    loop_text = s.text_of(lp_node)
    off = lp_node.start_byte
    edits = sorted([(cond.start_byte - off, cond.end_byte - off,
                     f"kc_in && ({s.text_of(cond)})"),
                    (upd.start_byte - off, upd.end_byte - off, f"{lp.var} += blockDim.y"),
                    (start.start_byte - off, start.end_byte - off,
                     f"({s.text_of(start)}) + threadIdx.y")], reverse=True)
    for a, b, t in edits:
        loop_text = loop_text[:a] + t + loop_text[b:]
    combine = []
    for k, (name, op) in enumerate(v.reductions.items()):
        ty = types[name]
        slot = f"kc_part{k}[threadIdx.y * blockDim.x + threadIdx.x]"
        other = f"kc_part{k}[kc_y * blockDim.x + threadIdx.x]"
        step = f"{name} += {other};" if op == "+" else \
            f"{name} = {other} {'>' if op == 'max' else '<'} {name} ? {other} : {name};"
        keep = (f"    __shared__ {ty} kc_part{k}[1024];  // a partial per thread\n"
                f"    {slot} = {name};")
        combine.append((keep, f"        {step}"))
    post_text = dedent_block(s, post) if post else ""
    body = "\n".join([
        "{",
        "    // kernelcrew split_reduce: the loop split over the block's y threads, the",
        "    // partial results combined in shared memory by the y = 0 thread",
        f"    {pi.ty} {pi.var} = {pi.init};",
        f"    const bool kc_in = {pi.var} < {pi.bound};",
        *("    " + dedent_block(s, [st]).replace("\n", "\n    ") for st in pre),
        "    " + loop_text.replace("\n" + s.indent_of(lp_node), "\n    "),
        *(a for a, _ in combine),
        "    __syncthreads();",
        "    if (threadIdx.y != 0 || !kc_in) return;",
        "    for (int kc_y = 1; kc_y < (int)blockDim.y; ++kc_y) {",
        *(b for _, b in combine),
        "    }",
        *(["    " + post_text.replace("\n", "\n    ")] if post_text else []),
        "}",
    ])
    fb = pi.fn.child_by_field_name("body")
    out = apply_edits(s, [Edit(fb.start_byte, fb.end_byte, body)])
    return (None, "the rewrite does not parse") if Source(out).has_errors() else (out, pi.bound)


def _grid(kf: KernelFile, kernel: str, bound: str, args: list[str]) -> str | None:
    """ceil_div(bound, SPLIT_X) in the launch's terms; None when the bound uses anything
    but size arguments and integers."""
    fn_params = params(find_function(Source(kf.body), kernel))
    names = {p.name: a for p, a in zip(fn_params, args, strict=False) if p.pointer is None}
    out = []
    for tok in re.findall(r"[A-Za-z_]\w*|\d+|\S", bound):
        if re.match(r"[A-Za-z_]", tok):
            if tok not in names:
                return None
            out.append(names[tok])
        elif tok.isdigit() or tok in "+-*()":
            out.append(tok)
        else:
            return None
    return f"ceil_div({''.join(out)}, SPLIT_X)"


def why_not(kf: KernelFile) -> str:
    reasons = []
    for e in entries(kf):
        out, why = split(kf.body, e)
        if out is None:
            reasons.append(f"{e}(): {why}")
    return "; ".join(reasons[:3]) or "a launch is not 1-D, or its bound is not made of sizes"


def split_reduce_in_file(kf: KernelFile, p: dict[str, Any]) -> Outcome | None:
    body, grids = kf.body, {}
    for e in entries(kf):
        launches = [lc for lc in kf.meta.launch if lc.kernel == e]
        if not launches or any(len(lc.grid) != 1 or len(lc.block) != 1 for lc in launches):
            continue
        out, bound = split(body, e)
        if out is None:
            continue
        g = [_grid(kf, e, bound, lc.args) for lc in launches]
        if any(x is None for x in g):
            continue
        body, grids[e] = out, g
    if not grids:
        return None
    launch, seen = [], {k: 0 for k in grids}
    for lc in kf.meta.launch:
        lc = lc.model_copy(deep=True)
        if lc.kernel in grids:
            lc.grid = [grids[lc.kernel][seen[lc.kernel]]]
            seen[lc.kernel] += 1
            lc.block = ["SPLIT_X", "SPLIT_Y"]
        launch.append(lc)
    knobs = {"SPLIT_X": kf.meta.knobs.get("SPLIT_X", int(p["x"])),
             "SPLIT_Y": kf.meta.knobs.get("SPLIT_Y", int(p["y"]))}
    return Outcome(body=body, launch=launch, knobs=knobs)
