"""atomic_reduce: a sum that every thread (or every block) adds to one address with
atomicAdd becomes a register sum per thread, one block reduction (warp shuffles, one
shared-memory stage) and one atomicAdd per block.

Recognized, in a kernel launched on a 1-D grid of 1-D blocks:

- one index per thread (`T i = blockIdx.x*blockDim.x + threadIdx.x;` and its guard) whose
  work adds to addresses that are the same for every thread: `atomicAdd(P, e);` with P
  made of parameters and constants only (`r`, `&out[0]`, `sum + 2`);
- the textbook block sum: each thread's value in a shared slot (`S[threadIdx.x] = i < N
  ? e : 0;`), `__syncthreads()`, a shared-memory tree over the block, and
  `if (threadIdx.x == 0) atomicAdd(P, S[0]);`.

Rewritten: the index walks the elements in a grid-stride loop (`i += gridDim.x *
blockDim.x`) adding each e into a register of P's element type; after the loop
`kc_block_reduce` combines the block's registers and thread 0 adds the total to P. The
launch grid is capped by the GRID_CAP knob, so the atomics per call fall from one per
element (or per block of the full grid) to one per block of the capped grid.

Legal because addition into P was already unordered (atomics from any thread in any
order): only the grouping of the sum changes, as in any reduction order the hardware
could have picked. Refused when an atomic's address depends on the thread (a histogram:
its addresses differ), when its value is used, when the work synchronizes, uses shared
memory, other atomics or warp operations, returns early or writes the index, and when a
launch of the kernel is not 1-D.
"""

from __future__ import annotations

import re
from typing import Any

from kernelcrew.agents.transforms.analysis.cuda_blocks import helpers_edit, tree_loop
from kernelcrew.agents.transforms.analysis.cuda_shapes import (
    THREAD_WORDS,
    blocker,
    element_type,
    indent,
    norm,
    per_index,
)
from kernelcrew.agents.transforms.kernel_files import Outcome, entries
from kernelcrew.csource.syntax import (
    Edit,
    Node,
    Source,
    apply_edits,
    declarators,
    find_function,
    lookup,
    params,
    walk,
)
from kernelcrew.kernels.kernelfile import KernelFile

_TID_FORMS = {"blockIdx.x*blockDim.x+threadIdx.x", "blockDim.x*blockIdx.x+threadIdx.x",
              "threadIdx.x+blockIdx.x*blockDim.x", "threadIdx.x+blockDim.x*blockIdx.x"}
_ZERO = re.compile(r"^\(?\s*(\(\s*\w+\s*\)\s*)?(0|0\.0*|0\.0*f|0\.f|0f|0\.0*F|0L|0LL|0u)\s*\)?$")


def _pointer_of(s: Source, fn: Node, p: Node) -> str | None:
    """The element type that an address expression made of parameters and constants
    points at (`r`, `&out[k]`, `sum + 2`); None when it depends on anything else."""
    by = {x.name: x for x in params(fn)}
    roots = []
    for n in walk(p):
        if n.type == "identifier":
            name = n.text.decode()
            if name in THREAD_WORDS:
                return None
            d = lookup(name, n)
            if d is None:
                continue  # a macro or constant
            if not d.param:
                return None  # a local: may differ between threads
            if by[name].pointer is not None:
                roots.append(name)
        elif n.type == "field_expression":
            return None
    if len(set(roots)) != 1:
        return None
    return element_type(by[roots[0]], s)


def _uniform_atomics(s: Source, fn: Node, stmts: list[Node]) -> list[tuple[Node, str, Node, str]] | str:
    """(statement, address text, value node, element type) of each atomicAdd in the work;
    a reason when one cannot be rewritten."""
    out = []
    for st in stmts:
        for n in walk(st):
            if n.type != "call_expression" or \
                    s.text_of(n.child_by_field_name("function")).strip() != "atomicAdd":
                continue
            stmt = n.parent
            if stmt is None or stmt.type != "expression_statement":
                return f"the value of atomicAdd at line {s.line_of(n)} is used"
            args = n.child_by_field_name("arguments").named_children
            if len(args) != 2:
                return f"atomicAdd at line {s.line_of(n)} does not take two arguments"
            ty = _pointer_of(s, fn, args[0])
            if ty is None:
                return f"the address of atomicAdd at line {s.line_of(n)} " \
                    f"({s.text_of(args[0])}) differs between threads"
            out.append((stmt, s.text_of(args[0]).strip(), args[1], ty))
    return out


def _sums(atomics: list[tuple[Node, str, Node, str]]) -> dict[str, tuple[str, str]]:
    """address (spaces removed) -> (register, element type)."""
    regs: dict[str, tuple[str, str]] = {}
    for _st, addr, _v, ty in atomics:
        key = re.sub(r"\s+", "", addr)
        if key not in regs:
            regs[key] = (f"kc_sum{len(regs)}", ty)
    return regs


def _finish(regs: dict[str, tuple[str, str]], addrs: dict[str, str]) -> str:
    lines = []
    for key, (reg, _ty) in regs.items():
        lines.append(f"    {reg} = kc_block_reduce<kc_op_sum>({reg});")
    for key, (reg, _ty) in regs.items():
        lines.append(f"    if (threadIdx.x == 0) atomicAdd({addrs[key]}, {reg});")
    return "\n".join(lines)


def per_thread_form(s: Source, kernel: str) -> tuple[Node, str] | str:
    """(function, new body) of the per-index form; a reason otherwise."""
    pi = per_index(s, kernel)
    if pi is None:
        return "not one index per thread (blockIdx.x*blockDim.x + threadIdx.x and a guard)"
    atomics = _uniform_atomics(s, pi.fn, pi.stmts)
    if isinstance(atomics, str):
        return atomics
    if not atomics:
        return "no atomicAdd in the per-thread work"
    calls = frozenset(n.start_byte for st, *_ in atomics for n in walk(st)
                      if n.type == "call_expression")
    why = blocker(s, pi.stmts, pi.var, allowed=calls)
    if why is not None:
        return f"the work {why}"
    if any(n.type == "identifier" and n.text.decode().startswith("kc_")
           for n in walk(pi.fn)):
        return "names starting with kc_ are taken"
    regs = _sums(atomics)
    addrs = {re.sub(r"\s+", "", a): a for _, a, _, _ in atomics}
    start, end = pi.stmts[0].start_byte, pi.stmts[-1].end_byte
    edits = []
    for st, addr, val, _ty in atomics:
        reg = regs[re.sub(r"\s+", "", addr)][0]
        edits.append((st.start_byte, st.end_byte, f"{reg} += {s.text_of(val)};"))
    data = s.data[start:end]
    for a, b, t in sorted(edits, reverse=True):
        data = data[:a - start] + t.encode() + data[b - start:]
    base = s.indent_of(pi.stmts[0])
    work = "\n".join(ln[len(base):] if ln.startswith(base) else ln.lstrip()
                     for ln in (base + data.decode()).split("\n"))
    decls = "\n".join(f"    {ty} {reg} = ({ty})0;" for reg, ty in regs.values())
    body = (f"{{\n"
            f"    // kernelcrew atomic_reduce: a register sum per thread over a grid-stride "
            f"loop,\n    // one block reduction and one atomicAdd per block\n"
            f"{decls}\n"
            f"    for ({pi.ty} {pi.var} = {pi.init}; {pi.var} < {pi.bound}; "
            f"{pi.var} += ({pi.ty})gridDim.x * blockDim.x) {{\n"
            f"{indent(work, ' ' * 8)}\n"
            f"    }}\n"
            f"{_finish(regs, addrs)}\n"
            f"}}")
    return pi.fn, body


def _thread_slot(s: Source, node: Node) -> bool:
    text = norm(s.text_of(node))
    if text == "threadIdx.x":
        return True
    if node.type != "identifier":
        return False
    d = lookup(node.text.decode(), node)
    return d is not None and d.init is not None and norm(s.text_of(d.init)) == "threadIdx.x"


def _slot(s: Source, slot: Node, var: str) -> tuple[str, Node, str] | str:
    """(the shared array, the value, the bound) of `S[threadIdx.x] = var < N ? e : 0;`."""
    bad = "the block sum's slot is not written as S[threadIdx.x] = i < N ? value : 0"
    e = slot.named_children[0] if slot.type == "expression_statement" and \
        slot.named_children else None
    if e is None or e.type != "assignment_expression" or \
            e.child_by_field_name("left").type != "subscript_expression":
        return bad
    left, right = e.child_by_field_name("left"), e.child_by_field_name("right")
    buf = s.text_of(left.child_by_field_name("argument")).strip()
    idx_node = left.child_by_field_name("indices")
    slot_idx = idx_node.named_children[0] if idx_node is not None and idx_node.named_children \
        else None
    while right.type == "parenthesized_expression" and right.named_children:
        right = right.named_children[0]
    if slot_idx is None or not _thread_slot(s, slot_idx) or \
            right.type != "conditional_expression":
        return bad
    cond = right.child_by_field_name("condition")
    val, zero = right.child_by_field_name("consequence"), right.child_by_field_name(
        "alternative")
    while cond.type == "parenthesized_expression" and cond.named_children:
        cond = cond.named_children[0]
    if cond.type != "binary_expression" or not _ZERO.match(s.text_of(zero).strip()):
        return bad
    op = cond.child_by_field_name("operator").type
    lt, rt = (s.text_of(cond.child_by_field_name(x)).strip() for x in ("left", "right"))
    if op == "<" and lt == var:
        return buf, val, rt
    if op == ">" and rt == var:
        return buf, val, lt
    return "the block sum's slot is not guarded by i < N"


def tree_form(s: Source, kernel: str) -> tuple[Node, str] | str:
    """(function, new body) of the textbook block sum; a reason otherwise."""
    fn = find_function(s, kernel)
    if fn is None:
        return f"{kernel} is not defined"
    stmts = [c for c in fn.child_by_field_name("body").named_children if c.type != "comment"]
    idx = None
    k = 0
    while k < len(stmts) and stmts[k].type == "declaration":
        for name, init, _p, _a in declarators(stmts[k]):
            if init is not None and norm(s.text_of(init)) in _TID_FORMS:
                idx = (name, s.text_of(stmts[k].child_by_field_name("type")).strip(),
                       s.text_of(init))
        k += 1
    if idx is None or k + 3 >= len(stmts):
        return "not a block sum (a value per thread in a shared slot, a tree, one atomicAdd)"
    slot, sync, tree, final = stmts[k:k + 4]
    if k + 4 != len(stmts):
        return "statements after the block sum's atomicAdd"
    var = idx[0]
    got = _slot(s, slot, var)
    if isinstance(got, str):
        return got
    buf, val, bound = got
    if norm(s.text_of(sync)) != "__syncthreads();" or tree.type != "for_statement":
        return "no barrier and shared-memory tree after the block sum's slot"
    got = tree_loop(s, tree)
    if got is None or got[0] != buf or got[2] != "kc_op_sum":
        return "the tree after the slot is not a sum over the same shared array"
    # if (t == 0) atomicAdd(P, S[0]);
    if final.type != "if_statement" or final.child_by_field_name("alternative") is not None:
        return "the block's total is not added by one thread with atomicAdd"
    fc = final.child_by_field_name("condition").named_children[0]
    if fc.type != "binary_expression" or fc.child_by_field_name("operator").type != "==" or \
            not _thread_slot(s, fc.child_by_field_name("left")) or \
            s.text_of(fc.child_by_field_name("right")).strip() != "0":
        return "the block's total is not added by thread 0"
    atomics = _uniform_atomics(s, fn, [final])
    if isinstance(atomics, str):
        return atomics
    if len(atomics) != 1 or norm(s.text_of(atomics[0][2])) != f"{buf}[0]":
        return "thread 0 does not add S[0] with one atomicAdd"
    why = blocker(s, [val], var)
    if why is not None:
        return f"the per-thread value {why}"
    if any(n.type == "identifier" and n.text.decode().startswith("kc_") for n in walk(fn)):
        return "names starting with kc_ are taken"
    _st, addr, _v, ty = atomics[0]
    ity = idx[1]
    body = (f"{{\n"
            f"    // kernelcrew atomic_reduce: a register sum per thread over a grid-stride "
            f"loop,\n    // one block reduction and one atomicAdd per block\n"
            f"    {ty} kc_sum0 = ({ty})0;\n"
            f"    for ({ity} {var} = {idx[2]}; {var} < {bound}; "
            f"{var} += ({ity})gridDim.x * blockDim.x) {{\n"
            f"        kc_sum0 += {s.text_of(val)};\n"
            f"    }}\n"
            f"    kc_sum0 = kc_block_reduce<kc_op_sum>(kc_sum0);\n"
            f"    if (threadIdx.x == 0) atomicAdd({addr}, kc_sum0);\n"
            f"}}")
    return fn, body


def atomic_reduce(src: str, kernel: str) -> tuple[str | None, str]:
    """(the rewritten source, "") or (None, why the kernel is not of either form)."""
    s = Source(src)
    fn = find_function(s, kernel)
    if fn is None or not any(n.type == "call_expression" and s.text_of(
            n.child_by_field_name("function")).strip() == "atomicAdd" for n in walk(fn)):
        return None, "no atomicAdd in the kernel"
    got = per_thread_form(s, kernel)
    if isinstance(got, str):
        why = got
        got = tree_form(s, kernel)
        if isinstance(got, str):
            return None, got if "one index per thread" in why else f"{why}; {got}"
    fn, body = got
    fb = fn.child_by_field_name("body")
    edits = [Edit(fb.start_byte, fb.end_byte, body)]
    helpers = helpers_edit(s, fn)
    if helpers is not None:
        edits.append(helpers)
    out = apply_edits(s, edits)
    return (None, "the rewrite does not parse") if Source(out).has_errors() else (out, "")


def _one_d(kf: KernelFile, kernel: str) -> bool:
    return all(len(lc.grid) == 1 and len(lc.block) == 1
               for lc in kf.meta.launch if lc.kernel == kernel)


def why_not(kf: KernelFile) -> str:
    reasons = []
    for e in entries(kf):
        if not _one_d(kf, e):
            reasons.append(f"{e}(): launched on a grid or block of more than one dimension")
            continue
        out, why = atomic_reduce(kf.body, e)
        if out is None:
            reasons.append(f"{e}(): {why}")
    return "; ".join(reasons[:3]) or "no launched kernel"


# ---------------------------------------------------------------- on a kernel file

def atomic_reduce_in_file(kf: KernelFile, p: dict[str, Any]) -> Outcome | None:
    knob = str(p["knob"])
    body, changed = kf.body, set()
    for e in entries(kf):
        if not _one_d(kf, e):
            continue
        out, _why = atomic_reduce(body, e)
        if out is not None:
            body = out
            changed.add(e)
    if not changed:
        return None
    launch = []
    for lc in kf.meta.launch:
        lc = lc.model_copy(deep=True)
        if lc.kernel in changed and knob not in str(lc.grid[0]):
            lc.grid = [f"min({lc.grid[0]}, {knob})"]
        launch.append(lc)
    value = kf.meta.knobs.get(knob, int(p["default"]))
    return Outcome(body=body, launch=launch, knobs={knob: value})
