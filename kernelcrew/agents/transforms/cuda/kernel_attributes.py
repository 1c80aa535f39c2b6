"""CUDA moves on a kernel's attributes and loads: `ldg` (read-only loads through the
read-only data cache), `launch_bounds`, `grid_stride`.

ldg: `__restrict__` on every pointer parameter (`analysis.restrict`), then reads of
`const T* __restrict__` parameters, and of pointers derived from them, as `__ldg(&x[i])`.
Legal because the harness passes each parameter its own buffer: a const restrict buffer
cannot change while the kernel runs. Refused where no such read is left to rewrite.

launch_bounds: `__launch_bounds__(BLOCK)` on the kernels whose every launch in the front
matter has a block of the BLOCK knob alone (or one block shape made of knobs and integers:
their product), so ptxas budgets registers for that block size
(with `min_blocks`, for that many resident blocks per SM, replacing a bound the kernel
has). Legal because the launches guarantee the bound; refused where a kernel has a bound
already and no `min_blocks` is given.

grid_stride: one thread per element (`T i = blockIdx.x*blockDim.x + threadIdx.x; if (i >=
N) return; body`) becomes a loop `for (T i = ...; i < N; i += (T)gridDim.x * blockDim.x)`,
and the launch grid is capped by GRID_CAP, so each thread covers several elements. Legal
because each element's work was already independent of the others (one thread each, in
no particular order); refused when the body synchronizes the block, returns early or
changes i.
"""

from __future__ import annotations

import re
from typing import Any

from kernelcrew.agents.transforms.analysis.restrict import add_restrict
from kernelcrew.agents.transforms.kernel_files import Outcome, entries
from kernelcrew.csource.affine import FunctionModel
from kernelcrew.csource.syntax import (
    Edit,
    Node,
    Source,
    apply_edits,
    declarators,
    find_function,
    function_params,
    params,
    walk,
)
from kernelcrew.kernels.kernelfile import KernelFile


def _finish(s: Source, edits: list[Edit]) -> str | None:
    if not edits:
        return None
    out = apply_edits(s, edits)
    return None if out == s.text else out


def ldg(src: str, kernel: str) -> str | None:
    """Route reads of `const T* __restrict__` parameters (and pointers derived from them)
    through `__ldg(&x[i])`, the read-only data cache. Needs restrict: only then is the data
    known not to change while the kernel runs."""
    s = Source(src)
    fn = find_function(s, kernel)
    if fn is None:
        return None
    m = FunctionModel(s, fn)
    ro = {f"{p.name}@{p.node.start_byte}" for p in params(fn)
          if p.pointer is not None and p.const and p.restrict}
    if not ro:
        return None
    edits = []
    for n in walk(m.body):
        if n.type != "subscript_expression":
            continue
        p = n.parent
        if p.type in ("assignment_expression",) and p.child_by_field_name("left") == n:
            continue
        if p.type in ("update_expression", "pointer_expression"):
            continue
        if _inside_ldg(s, n):
            continue
        root = m.pointer_root(n.child_by_field_name("argument"), m.body)
        if root is None or root[0] not in ro:
            continue
        edits.append(Edit(n.start_byte, n.end_byte, f"__ldg(&{s.text_of(n)})"))
    # nested subscripts (x[idx[i]]): keep the outermost rewrite only
    edits = [e for e in edits if not any(o is not e and o.start <= e.start and e.end <= o.end
                                         for o in edits)]
    return _finish(s, edits)


def _inside_ldg(s: Source, n: Node) -> bool:
    p = n.parent
    while p is not None and p.type in ("pointer_expression", "argument_list",
                                       "parenthesized_expression"):
        p = p.parent
    return p is not None and p.type == "call_expression" and \
        s.text_of(p.child_by_field_name("function")).strip() == "__ldg"


def launch_bounds(src: str, kernel: str, block: str = "BLOCK",
                  min_blocks: int | None = None) -> str | None:
    """`__launch_bounds__(BLOCK)` on a kernel: ptxas may then use up to 64K/BLOCK registers
    per thread and no more, and knows the block size it must fit. With `min_blocks`,
    `__launch_bounds__(BLOCK, min_blocks)`: ptxas keeps registers low enough for that many
    resident blocks per SM (replacing a bound the kernel already has)."""
    s = Source(src)
    fn = find_function(s, kernel)
    if fn is None:
        return None
    decl = function_params(fn).parent  # function_declarator
    head = s.data[fn.start_byte:decl.start_byte].decode()
    bound = f"__launch_bounds__({block}{f', {int(min_blocks)}' if min_blocks else ''})"
    if "__launch_bounds__" in head:
        if not min_blocks:
            return None
        m = re.search(r"__launch_bounds__\s*\((?:[^()]|\([^()]*\))*\)", head)
        at = fn.start_byte + len(head[:m.start()].encode())
        return _finish(s, [Edit(at, at + len(m.group(0).encode()), bound)])
    name = decl.child_by_field_name("declarator")
    return _finish(s, [Edit(name.start_byte, name.start_byte, f"{bound} ")])


def _thread_index_decl(s: Source, st: Node) -> tuple[str, str, str] | None:
    """(type, name, init) of `T i = blockIdx.x * blockDim.x + threadIdx.x;` forms."""
    if st.type != "declaration":
        return None

    ds = list(declarators(st))
    if len(ds) != 1 or ds[0][1] is None or ds[0][2]:
        return None
    init = s.text_of(ds[0][1])
    if "threadIdx.x" not in init or "blockIdx.x" not in init:
        return None
    ty = s.text_of(st.child_by_field_name("type"))
    if "const" in s.text_of(st).split(ty)[0]:
        return None
    return ty, ds[0][0], init


def _guard(s: Source, st: Node, var: str) -> tuple[str, str] | None:
    """`if (i >= N) return;` -> ("exit", N); `if (i < N) body` -> ("wrap", N)."""
    if st.type != "if_statement" or st.child_by_field_name("alternative") is not None:
        return None
    cond = st.child_by_field_name("condition")
    c = cond.named_children[0] if cond is not None and cond.named_children else None
    if c is None or c.type != "binary_expression":
        return None
    op = c.child_by_field_name("operator").type
    left, right = c.child_by_field_name("left"), c.child_by_field_name("right")
    lt, rt = s.text_of(left).strip(), s.text_of(right).strip()
    cons = st.child_by_field_name("consequence")
    is_return = cons.type == "return_statement" and not cons.named_children
    if op == ">=" and lt == var and is_return:
        return "exit", rt
    if op == "<=" and rt == var and is_return:
        return "exit", lt
    if op == "<" and lt == var and not is_return:
        return "wrap", rt
    if op == ">" and rt == var and not is_return:
        return "wrap", lt
    return None


def grid_stride(src: str, kernel: str) -> str | None:
    """One thread per element -> a grid-stride loop, so a capped grid covers any size:
    `T i = blockIdx.x*blockDim.x + threadIdx.x; if (i >= N) return; body` becomes
    `for (T i = ...; i < N; i += (T)gridDim.x * blockDim.x) { body }`. Refused when the body
    synchronizes the block, returns early or changes i."""
    s = Source(src)
    fn = find_function(s, kernel)
    if fn is None:
        return None
    body = fn.child_by_field_name("body")
    stmts = [c for c in body.named_children if c.type != "comment"]
    for k, st in enumerate(stmts[:-1]):
        got = _thread_index_decl(s, st)
        if got is None:
            continue
        ty, var, init = got
        g = _guard(s, stmts[k + 1], var)
        if g is None:
            return None
        mode, bound = g
        if mode == "exit":
            rest = stmts[k + 2:]
            if not rest:
                return None
            inner = s.data[rest[0].start_byte:rest[-1].end_byte].decode()
            first_rest = rest[0]
        else:
            if k + 2 != len(stmts):
                return None
            cons = stmts[k + 1].child_by_field_name("consequence")
            first_rest = cons
            if cons.type == "compound_statement":
                inner = s.data[cons.start_byte + 1:cons.end_byte - 1].decode().strip()
            else:
                inner = s.text_of(cons)
        scope = rest if mode == "exit" else [first_rest]
        if _blocks_grid_stride(s, scope, var):
            return None
        ind = s.indent_of(st)
        lines = inner.split("\n")
        first_ind = s.indent_of(first_rest)
        body_text = "\n".join(
            (ind + "    " + ln[len(first_ind):] if ln.startswith(first_ind) else
             ind + "    " + ln.lstrip()) if ln.strip() else ""
            for ln in [first_ind + lines[0].lstrip()] + lines[1:])
        stride = f"({ty})gridDim.x * blockDim.x"
        new = (f"for ({ty} {var} = {init}; {var} < {bound}; {var} += {stride}) {{\n"
               f"{body_text}\n{ind}}}")
        return _finish(s, [Edit(st.start_byte, stmts[-1].end_byte, new)])
    return None


def _blocks_grid_stride(s: Source, stmts: list[Node], var: str) -> bool:
    """Early returns, block-level synchronization, shared memory or writes to the index
    make a grid-stride loop wrong (threads of a block would leave at different times)."""
    for st in stmts:
        if "__shared__" in s.text_of(st):
            return True
        for n in walk(st):
            # (break/continue can only sit in loops of the body itself: they stay valid)
            if n.type in ("return_statement", "goto_statement"):
                return True
            if n.type == "call_expression" and re.match(
                    r"(__syncthreads|__syncwarp|__syncthreads_\w+|this_grid|sync)\b",
                    s.text_of(n.child_by_field_name("function")).strip()):
                return True
            t = n.child_by_field_name("left") if n.type == "assignment_expression" else \
                n.child_by_field_name("argument") if n.type == "update_expression" else None
            if t is not None and t.type == "identifier" and t.text.decode() == var:
                return True
    return False


# ---------------------------------------------------------------- on a kernel file

def ldg_in_file(kf: KernelFile, p: dict[str, Any]) -> Outcome | None:
    """`__restrict__` and then `__ldg` on every kernel and the functions it calls."""
    body, changed = kf.body, False
    for e in entries(kf):
        for fn in (add_restrict, ldg):
            new = fn(body, e)
            if new is not None:
                body, changed = new, True
    return Outcome(body=body) if changed else None


def block_bound(kf: KernelFile, kernel: str, knob: str) -> str | None:
    """The C expression of the threads per block every launch of `kernel` has: the
    `knob` alone, or a product of knobs and integers (`TILE_N // REG_N` and `TILE_M //
    REG_M` -> `(TILE_N / REG_N) * (TILE_M / REG_M)`); None when the launches differ or
    a block uses a size (not known when the kernel is compiled)."""
    blocks = {tuple(str(b) for b in lc.block) for lc in kf.meta.launch if lc.kernel == kernel}
    if len(blocks) != 1:
        return None
    (block,) = blocks
    if list(block) == [knob]:
        return knob
    dims = []
    for d in block:
        names = re.findall(r"[A-Za-z_]\w*", d)
        if any(n not in kf.meta.knobs and n not in ("min", "max") for n in names) or \
                re.search(r"[^\w\s+*/()-]", d) or "ceil_div" in d:
            return None
        dims.append(f"({d.replace('//', '/')})")
    return " * ".join(dims)


def launch_bounds_in_file(kf: KernelFile, p: dict[str, Any]) -> Outcome | None:
    """`__launch_bounds__` on the kernels whose launches all have one block shape made of
    knobs and integers (the `knob` alone, or tiles such as [TILE, TILE_ROWS])."""
    knob = str(p["knob"])
    body, changed = kf.body, False
    for e in dict.fromkeys(lc.kernel for lc in kf.meta.launch):
        bound = block_bound(kf, e, knob)
        if bound is None or (bound == knob and knob not in kf.meta.knobs):
            continue
        new = launch_bounds(body, e, bound, p.get("min_blocks"))
        if new is not None:
            body, changed = new, True
    return Outcome(body=body) if changed else None


def grid_stride_in_file(kf: KernelFile, p: dict[str, Any]) -> Outcome | None:
    """Grid-stride loops, and the grid of their launches capped by the `knob`."""
    knob = str(p["knob"])
    body, changed = kf.body, set()
    for e in entries(kf):
        new = grid_stride(body, e)
        if new is not None:
            body = new
            changed.add(e)
    if not changed:
        return None
    launch = []
    for lc in kf.meta.launch:
        lc = lc.model_copy(deep=True)
        if lc.kernel in changed and len(lc.grid) == 1 and knob not in str(lc.grid[0]):
            lc.grid = [f"min({lc.grid[0]}, {knob})"]
        launch.append(lc)
    value = kf.meta.knobs.get(knob, int(p["default"]))
    return Outcome(body=body, launch=launch, knobs={knob: value})
