"""Row reductions with warp shuffles: one thread per row -> one block per row.

A kernel whose threads each own a row (`T i = blockIdx.x*blockDim.x+threadIdx.x;
if (i >= R) return;`) and walk it with loops of independent iterations (reductions into
scalars: `+`/`-`, max, min; elementwise writes) becomes a kernel in which a block owns a
row: `i = blockIdx.x`, every loop `for (j = a; j < b; ++j)` strides over the block
(`j = a + threadIdx.x; ...; j += blockDim.x`), and after a loop each reduced scalar is
combined over the block by `kc_block_reduce`: `__shfl_down_sync` within each warp, one
shared-memory stage across the warps, the result broadcast to every thread. Statements
outside the loops run in every thread (they compute the same values); writes to memory
outside the loops are done by thread 0. A loop whose results a later loop reads from
memory is followed by `__syncthreads()` (global writes are then visible to the block).
The launch grid becomes R blocks.

Legal when every loop's iterations are independent apart from the reductions (the CPU's
parallel-for analysis, `check_loop`), a `+` reduction starts from 0 (each thread starts a
partial sum from its initializer) and nothing else in the row's code depends on the
thread. Shared-memory trees and atomics that earlier code used are not needed: the block
reduction replaces them.
"""

from __future__ import annotations

import re
from typing import Any

from kernelcrew.agents.transforms.analysis.cuda_blocks import helpers_edit, tree_loop
from kernelcrew.agents.transforms.analysis.cuda_shapes import blocker, param_ref, per_index
from kernelcrew.agents.transforms.analysis.dependence import check_loop
from kernelcrew.agents.transforms.kernel_files import Outcome, entries
from kernelcrew.csource.affine import FunctionModel
from kernelcrew.csource.syntax import (
    Edit,
    Node,
    Source,
    apply_edits,
    declarators,
    find_function,
    lookup,
    loops_in,
    params,
    walk,
)
from kernelcrew.kernels.kernelfile import KernelFile

_OPS = {"+": "kc_op_sum", "max": "kc_op_max", "min": "kc_op_min"}
_ZERO = re.compile(r"^\(?\s*(0|0\.0*|0\.0*f|0\.f|0f|0\.0*F|0L|0LL|0u|0ULL)\s*\)?$")


def _top_decl(name: str, stmts: list[Node]) -> Node | None:
    for st in stmts:
        if st.type == "declaration" and any(d[0] == name for d in declarators(st)):
            return st
    return None


def block_per_row(src: str, kernel: str) -> tuple[str, str] | None:
    """(new source, the guard's bound as written) or None when the rewrite is not legal."""
    # stays long: one walk over the kernel's statements that rewrites each loop and
    # reduction in place; the edits share the thread-index names it finds
    s = Source(src)
    pi = per_index(s, kernel)
    if pi is None:
        return None
    if blocker(s, pi.stmts, pi.var) is not None:
        return None
    m = FunctionModel(s, pi.fn)
    loops = [lp for lp in loops_in(pi.fn.child_by_field_name("body"))]
    top_loops = [lp for lp in loops if lp.node in pi.stmts or
                 any(lp.node.start_byte == st.start_byte for st in pi.stmts)]
    if not top_loops or len(top_loops) != len(loops):
        return None  # loops nested in other statements: not handled
    edits: list[Edit] = []
    reduced_any = False
    written_later: dict[int, set[str]] = {}
    for lp in top_loops:
        if not lp.canonical or lp.step is not None or lp.inclusive:
            return None
        v = check_loop(m, lp, allow_reductions=True)
        if not v.ok:
            return None
        if any(op not in _OPS for op in v.reductions.values()):
            return None
        for name, op in v.reductions.items():
            d = _top_decl(name, pi.stmts)
            if d is None:
                return None
            init = next(x[1] for x in declarators(d) if x[0] == name)
            if op == "+" and (init is None or not _ZERO.match(s.text_of(init).strip())):
                return None  # each thread's partial sum starts from the initializer
            # nothing else may change the scalar between its declaration and the loop
            for st in pi.stmts:
                if d.start_byte < st.start_byte < lp.node.start_byte and \
                        _writes_name(s, st, name):
                    return None
        # the loop strides over the block
        upd = lp.node.child_by_field_name("update")
        start = lp.start
        edits.append(Edit(start.start_byte, start.end_byte,
                          f"{s.text_of(start)} + threadIdx.x"))
        edits.append(Edit(upd.start_byte, upd.end_byte, f"{lp.var} += blockDim.x"))
        after = ""
        for name, op in v.reductions.items():
            after += f"\n{s.indent_of(lp.node)}{name} = kc_block_reduce<{_OPS[op]}>({name});"
            reduced_any = True
        written_later[lp.node.start_byte] = _written_roots(m, lp.node)
        if after:
            edits.append(Edit(lp.node.end_byte, lp.node.end_byte, after))
    # memory a loop writes and later code reads: a barrier after the loop
    for lp in top_loops:
        roots = written_later[lp.node.start_byte]
        later = [st for st in pi.stmts if st.start_byte > lp.node.start_byte]
        if roots and any(_reads_root(m, st, roots) for st in later):
            edits.append(Edit(lp.node.end_byte, lp.node.end_byte,
                              f"\n{s.indent_of(lp.node)}__syncthreads();"))
    # statements outside the loops: writes to memory by thread 0 only
    for st in pi.stmts:
        if st.type == "for_statement":
            continue
        if _writes_memory(s, st):
            later = [x for x in pi.stmts if x.start_byte > st.start_byte]
            if any(_reads_root(m, x, _written_roots(m, st)) for x in later):
                return None
            edits.append(Edit(st.start_byte, st.start_byte, "if (threadIdx.x == 0) "))
    if not reduced_any:
        return None  # nothing to combine over the block: per-element kernels stay as they are
    # the row index: one block per row
    init_node = next(x[1] for x in declarators(pi.decl) if x[0] == pi.var)
    edits.append(Edit(init_node.start_byte, init_node.end_byte, f"({pi.ty})blockIdx.x"))
    helpers = helpers_edit(s, pi.fn)  # before any comment lines that introduce the kernel
    if helpers is not None:
        edits.append(helpers)
    out = apply_edits(s, edits)
    if Source(out).has_errors():
        return None
    return out, pi.bound


def _writes_name(s: Source, node: Node, name: str) -> bool:
    for n in walk(node):
        t = n.child_by_field_name("left") if n.type == "assignment_expression" else \
            n.child_by_field_name("argument") if n.type == "update_expression" else None
        if t is not None and t.type == "identifier" and t.text.decode() == name:
            return True
    return False


def _writes_memory(s: Source, node: Node) -> bool:
    for n in walk(node):
        t = n.child_by_field_name("left") if n.type == "assignment_expression" else \
            n.child_by_field_name("argument") if n.type == "update_expression" else None
        if t is not None and t.type in ("subscript_expression", "pointer_expression"):
            return True
    return False


def _written_roots(m: FunctionModel, node: Node) -> set[str]:
    out = set()
    for n in walk(node):
        t = n.child_by_field_name("left") if n.type == "assignment_expression" else \
            n.child_by_field_name("argument") if n.type == "update_expression" else None
        if t is not None and t.type == "subscript_expression":
            r = m.subscript(t, m.body)
            out.add(r[0] if r is not None else "?")
    return out


def _reads_root(m: FunctionModel, node: Node, roots: set[str]) -> bool:
    if "?" in roots:
        return True
    for n in walk(node):
        if n.type == "subscript_expression":
            r = m.subscript(n, m.body)
            if r is None or r[0] in roots:
                return True
    return False


def bound_as_grid(bound: str, names: dict[str, str], sizes: set[str]) -> str | None:
    """The guard bound in launch-plan terms (parameter names -> the launch's size args);
    None when it uses anything but sizes, integers and + - * ( )."""
    out = []
    for tok in re.findall(r"[A-Za-z_]\w*|\d+|\S", bound):
        if re.match(r"[A-Za-z_]", tok):
            arg = names.get(tok)
            if arg is None or arg not in sizes:
                return None
            out.append(arg)
        elif tok.isdigit() or tok in "+-*()":
            out.append(tok)
        else:
            return None
    return " ".join(out)


__all__ = ["block_per_row", "bound_as_grid", "lookup", "param_ref"]


# ---------------------------------------------------------------- shared-memory trees

def tree_to_shuffle(src: str, kernel: str) -> str | None:
    """A shared-memory tree reduction (`for (s = blockDim.x/2; s > 0; s >>= 1) { if (t < s)
    B[t] += B[t + s]; __syncthreads(); }`) -> kc_block_reduce (warp shuffles, one shared
    stage) with the total written to B[0] as before. Refused when later code reads other
    elements of B (the tree left partial sums there) or B is not the thread's own slot."""
    s = Source(src)
    fn = find_function(s, kernel)
    if fn is None:
        return None
    edits = []
    for lp in [n for n in walk(fn) if n.type == "for_statement"]:
        got = tree_loop(s, lp)
        if got is None:
            continue
        buf, t, op = got
        later = [n for n in walk(fn) if n.type == "subscript_expression"
                 and n.start_byte >= lp.end_byte
                 and s.text_of(n.child_by_field_name("argument")).strip() == buf]
        if any(s.text_of(n).replace(" ", "") != f"{buf}[0]" for n in later):
            continue
        ind = s.indent_of(lp)
        new = (f"{{  // kernelcrew: the shared-memory tree as warp shuffles + one shared stage\n"
               f"{ind}    auto kc_total = kc_block_reduce<{op}>({buf}[{t}]);\n"
               f"{ind}    if ({t} == 0) {buf}[0] = kc_total;\n"
               f"{ind}    __syncthreads();\n"
               f"{ind}}}")
        edits.append(Edit(lp.start_byte, lp.end_byte, new))
    if not edits:
        return None
    helpers = helpers_edit(s, fn)
    out = apply_edits(s, edits + ([helpers] if helpers else []))
    return None if Source(out).has_errors() else out


# ---------------------------------------------------------------- on a kernel file

def block_reduce_in_file(kf: KernelFile, p: dict[str, Any]) -> Outcome | None:
    """One block per row where a kernel's rows map to a grid; shared-memory trees to warp
    shuffles in kernels launched with 1-D blocks."""
    body, grids = kf.body, {}
    sizes = set()
    for e in entries(kf):
        got = block_per_row(body, e)
        if got is None:
            continue
        new, bound = got
        for lc in kf.meta.launch:
            if lc.kernel != e or len(lc.grid) != 1 or len(lc.block) != 1:
                continue
            fn = find_function(Source(body), e)
            names = {prm.name: a for prm, a in zip(params(fn), lc.args, strict=False)}
            sizes = {a for a in lc.args if a not in kf.meta.temps and not _is_array(kf, a, fn,
                                                                                    lc)}
            grid = bound_as_grid(bound, names, sizes)
            if grid is None:
                break
            grids[e] = grid
        if e in grids:
            body = new
    # shared-memory trees in kernels launched with 1-D blocks only (the tree's threadIdx.x
    # is then the thread's place in the block)
    trees = False
    for e in entries(kf):
        if e in grids or any(lc.kernel == e and len(lc.block) != 1 for lc in kf.meta.launch):
            continue
        new = tree_to_shuffle(body, e)
        if new is not None:
            body, trees = new, True
    if not grids and not trees:
        return None
    launch = []
    for lc in kf.meta.launch:
        lc = lc.model_copy(deep=True)
        if lc.kernel in grids:
            lc.grid = [grids[lc.kernel]]
        launch.append(lc)
    return Outcome(body=body, launch=launch)


def _is_array(kf: KernelFile, arg: str, fn, lc) -> bool:
    """An argument passed to a pointer parameter."""
    for prm, a in zip(params(fn), lc.args, strict=False):
        if a == arg:
            return prm.pointer is not None
    return False
