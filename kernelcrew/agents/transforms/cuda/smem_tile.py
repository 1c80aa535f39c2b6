"""Shared-memory tiling of a transposing copy, so reads and writes are both coalesced.

Recognized: a kernel with one index per thread over R*C elements that splits the index
into coordinates (`a = i / C; b = i % C;`) and does one store `Y[e1] = f(X[e2])` where one
side walks memory with unit stride in b and the other with unit stride in a (a transpose,
possibly scaled: f may use parameters, not the coordinates). Rewritten: a block moves one
TILE x TILE tile (2-D grid of tiles, block [TILE, TILE_ROWS]): the threads read the tile
with threadIdx.x along the side that is contiguous for the read, into a shared array
padded by one column (TILE+1: the transposed reads of a column hit 32 different banks),
synchronize, and write it with threadIdx.x along the side contiguous for the write.
Edge tiles are guarded on both coordinates.

Legal because each element is still read once and written once by the same expression;
only which thread moves it changes, and `__syncthreads()` orders the shared tile's writes
before its reads. Refused unless the kernel's work is exactly the two coordinates (one
`/` and one `%` by the same count) and one store `Y[e1] = f(X[e2])` with a single read,
f using no coordinate outside that read, X and Y different arrays whose element type is
known, and the read and the write contiguous along different coordinates.
"""

from __future__ import annotations

import re
from typing import Any

from kernelcrew.agents.transforms.analysis.cuda_shapes import (
    blocker,
    element_type,
    norm,
    param_ref,
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
    params,
    subscript_index,
    walk,
)
from kernelcrew.kernels.kernelfile import KernelFile


def _strip(n: Node) -> Node:
    while n is not None and n.type == "parenthesized_expression" and n.named_children:
        n = n.named_children[0]
    return n


def _coordinate_terms(s: Source, n: Node, coords: set[str]) -> dict[str, str] | None:
    """An index expression as {coordinate: coefficient text, "1": constant text}; None when
    it is not a sum of products with at most one coordinate per product."""
    n = _strip(n)
    if n.type == "binary_expression":
        op = n.child_by_field_name("operator").type
        left, right = n.child_by_field_name("left"), n.child_by_field_name("right")
        if op == "+":
            a, b = _coordinate_terms(s, left, coords), _coordinate_terms(s, right, coords)
            if a is None or b is None:
                return None
            out = dict(a)
            for k, v in b.items():
                out[k] = f"({out[k]}) + ({v})" if k in out else v
            return out
        if op == "*":
            la, rb = _coordinate_terms(s, left, coords), _coordinate_terms(s, right, coords)
            if la is None or rb is None:
                return None
            if set(la) == {"1"}:
                return {k: _mul(la["1"], v) for k, v in rb.items()}
            if set(rb) == {"1"}:
                return {k: _mul(v, rb["1"]) for k, v in la.items()}
            return None
        if any(x in coords for x in _idents(n)):
            return None
        return {"1": s.text_of(n)}
    if n.type == "identifier" and n.text.decode() in coords:
        return {n.text.decode(): "1"}
    if any(x in coords for x in _idents(n)):
        return None
    return {"1": s.text_of(n)}


def _mul(a: str, b: str) -> str:
    if a == "1":
        return b
    if b == "1":
        return a
    return f"({a}) * ({b})"


def _idents(n: Node) -> set[str]:
    return {x.text.decode() for x in walk(n) if x.type == "identifier"}


def _read_side(s: Source, pi, a: str, b: str, cdim: str, coords: set[str], rd: Node,
               dst: Node) -> str | None:
    """The coordinate the read walks contiguously, where the write walks the other one
    contiguously (a transpose); None otherwise."""
    # the flat index itself is a*C + b
    def lin_of(node):
        node = subscript_index(node)
        if node is None:
            return None
        if s.text_of(node).strip() == pi.var:
            return {a: cdim, b: "1"}
        got = _coordinate_terms(s, node, coords)
        return None if got is None or pi.var in got else got

    lr, lw = lin_of(rd), lin_of(dst)
    if lr is None or lw is None:
        return None
    # read contiguous in b and write contiguous in a (or the reverse): a transpose
    if lr.get(b) == "1" and lw.get(a) == "1" and lr.get(a) and lw.get(b):
        read_fast = b
    elif lr.get(a) == "1" and lw.get(b) == "1" and lr.get(b) and lw.get(a):
        read_fast = a
    else:
        return None
    return read_fast


def _transpose_copy(s: Source, kernel: str) -> tuple | None:
    """The kernel's work as a transposing copy: (its per-index shape, the coordinate from
    `/`, the one from `%`, C, R, the store's target, its value, the read as
    written (`__ldg(&x[e])` whole), the element type, the coordinate the read is
    contiguous along); None when it is not one."""
    pi = per_index(s, kernel)
    if pi is None or blocker(s, pi.stmts, pi.var) is not None or len(pi.stmts) != 3:
        return None
    coord: dict[str, tuple[str, str]] = {}  # name -> ("/" or "%", C text)
    store = None
    for st in pi.stmts:
        if st.type == "declaration":
            ds = list(declarators(st))
            if len(ds) != 1 or ds[0][1] is None:
                return None
            e = _strip(ds[0][1])
            if e.type != "binary_expression" or e.child_by_field_name("operator").type not in \
                    ("/", "%") or s.text_of(e.child_by_field_name("left")).strip() != pi.var:
                return None
            coord[ds[0][0]] = (e.child_by_field_name("operator").type,
                               s.text_of(e.child_by_field_name("right")).strip())
        elif st.type == "expression_statement" and store is None:
            store = st
        else:
            return None
    if store is None or sorted(op for op, _ in coord.values()) != ["%", "/"]:
        return None
    a = next(k for k, v in coord.items() if v[0] == "/")
    b = next(k for k, v in coord.items() if v[0] == "%")
    cdim = coord[a][1]
    if coord[b][1] != cdim or not re.fullmatch(r"[A-Za-z_]\w*", cdim):
        return None
    bound = norm(pi.bound)
    m = re.fullmatch(rf"(\w+)\*{cdim}|{cdim}\*(\w+)", bound)
    if not m:
        return None
    rdim = m.group(1) or m.group(2)
    e = store.named_children[0]
    if e.type != "assignment_expression" or e.child_by_field_name("operator").type != "=":
        return None
    dst, rhs = e.child_by_field_name("left"), e.child_by_field_name("right")
    if dst.type != "subscript_expression":
        return None
    reads = [n for n in walk(rhs) if n.type == "subscript_expression"]
    if len(reads) != 1:
        return None
    rd = reads[0]
    read_site = rd
    p = rd.parent
    if p is not None and p.type == "pointer_expression" and p.parent is not None and \
            p.parent.type == "argument_list" and p.parent.parent is not None and \
            s.text_of(p.parent.parent.child_by_field_name("function")).strip() == "__ldg":
        read_site = p.parent.parent  # __ldg(&x[e]) as a whole
    coords = {a, b, pi.var}
    if _idents(rhs) & coords - _idents(rd):
        return None  # f uses a coordinate outside the read
    src_arr, dst_arr = rd.child_by_field_name("argument"), dst.child_by_field_name("argument")
    if src_arr.type != "identifier" or dst_arr.type != "identifier":
        return None
    sp, dp = param_ref(pi.fn, src_arr), param_ref(pi.fn, dst_arr)
    if sp is None or dp is None or sp == dp:
        return None
    by = {p.name: p for p in pi.params}
    ety = element_type(by[sp], s)
    if ety is None or element_type(by[dp], s) is None:
        return None
    read_fast = _read_side(s, pi, a, b, cdim, coords, rd, dst)
    if read_fast is None:
        return None
    return pi, a, b, cdim, rdim, dst, rhs, read_site, ety, read_fast


def tile_transpose(src: str, kernel: str, tile: str = "TILE") -> tuple[str, str, str, bool] | None:
    """(new source, R, C as written in the kernel (parameter names), whether blockIdx.x
    walks C), or None."""
    s = Source(src)
    got = _transpose_copy(s, kernel)
    if got is None:
        return None
    pi, a, b, cdim, rdim, dst, rhs, read_site, ety, read_fast = got
    names = {x.text.decode() for x in walk(pi.fn) if x.type == "identifier"}
    if {"kc_tile", "kc_r", "kc_a0", "kc_b0"} & names:
        return None
    ty = pi.ty
    flat = f"({a} * {cdim} + {b})"

    def text_without_flat(node: Node) -> str:
        """The node's text with the flat index spelled from the coordinates."""
        out = s.text_of(node)
        hits = sorted((x.start_byte - node.start_byte, x.end_byte - node.start_byte)
                      for x in walk(node) if x.type == "identifier"
                      and x.text.decode() == pi.var)
        for x0, x1 in reversed(hits):
            out = out[:x0] + flat + out[x1:]
        return out

    read_text = text_without_flat(read_site)
    value_expr = s.text_of(rhs)
    r0, r1 = read_site.start_byte - rhs.start_byte, read_site.end_byte - rhs.start_byte
    write_expr = value_expr[:r0] + "kc_tile[threadIdx.x][kc_r]" + value_expr[r1:]
    if read_fast == b:
        # tile rows follow a; threadIdx.x walks b when reading, a when writing
        tile_load = "kc_tile[kc_r][threadIdx.x]"
        write_expr = value_expr[:r0] + "kc_tile[threadIdx.x][kc_r]" + value_expr[r1:]
        read_coords = (f"{ty} {a} = kc_a0 + kc_r, {b} = kc_b0 + threadIdx.x;")
        write_coords = (f"{ty} {b} = kc_b0 + kc_r, {a} = kc_a0 + threadIdx.x;")
    else:
        tile_load = "kc_tile[kc_r][threadIdx.x]"
        write_expr = value_expr[:r0] + "kc_tile[threadIdx.x][kc_r]" + value_expr[r1:]
        read_coords = (f"{ty} {b} = kc_b0 + kc_r, {a} = kc_a0 + threadIdx.x;")
        write_coords = (f"{ty} {a} = kc_a0 + kc_r, {b} = kc_b0 + threadIdx.x;")
    body = (
        "{\n"
        f"    // one {tile}x{tile} tile per block: read along the read's contiguous side, "
        "write along the write's\n"
        f"    __shared__ {ety} kc_tile[{tile}][{tile} + 1];  // +1: no bank conflicts\n"
        f"    const {ty} kc_a0 = ({ty})blockIdx.{'y' if read_fast == b else 'x'} * {tile};\n"
        f"    const {ty} kc_b0 = ({ty})blockIdx.{'x' if read_fast == b else 'y'} * {tile};\n"
        f"    for (int kc_r = threadIdx.y; kc_r < {tile}; kc_r += blockDim.y) {{\n"
        f"        {read_coords}\n"
        f"        if ({a} < {rdim} && {b} < {cdim}) {tile_load} = {read_text};\n"
        "    }\n"
        "    __syncthreads();\n"
        f"    for (int kc_r = threadIdx.y; kc_r < {tile}; kc_r += blockDim.y) {{\n"
        f"        {write_coords}\n"
        f"        if ({a} < {rdim} && {b} < {cdim}) {text_without_flat(dst)} = {write_expr};\n"
        "    }\n"
        "}")
    fn_body = pi.fn.child_by_field_name("body")
    out = apply_edits(s, [Edit(fn_body.start_byte, fn_body.end_byte, body)])
    if Source(out).has_errors():
        return None
    return out, rdim, cdim, read_fast == b


# ---------------------------------------------------------------- on a kernel file

def smem_tile_in_file(kf: KernelFile, p: dict[str, Any]) -> Outcome | None:
    """Transposing copies through a shared-memory tile: a 2-D grid of TILE x TILE tiles,
    blocks of [TILE, TILE_ROWS]."""
    body, launch_of = kf.body, {}
    for e in entries(kf):
        got = tile_transpose(body, e)
        if got is None:
            continue
        new, rdim, cdim, x_walks_c = got
        fn = find_function(Source(body), e)
        for lc in kf.meta.launch:
            if lc.kernel != e:
                continue
            names = {prm.name: a for prm, a in zip(params(fn), lc.args, strict=False)}
            r, c = names.get(rdim), names.get(cdim)
            if r is None or c is None:
                break
            gx, gy = (c, r) if x_walks_c else (r, c)
            launch_of[e] = [f"ceil_div({gx}, TILE)", f"ceil_div({gy}, TILE)"]
        if e in launch_of:
            body = new
    if not launch_of:
        return None
    launch = []
    for lc in kf.meta.launch:
        lc = lc.model_copy(deep=True)
        if lc.kernel in launch_of:
            lc.grid = launch_of[lc.kernel]
            lc.block = ["TILE", "TILE_ROWS"]
            lc.shared_bytes = 0
        launch.append(lc)
    knobs = {"TILE": kf.meta.knobs.get("TILE", int(p["tile"])),
             "TILE_ROWS": kf.meta.knobs.get("TILE_ROWS", int(p["tile_rows"]))}
    return Outcome(body=body, launch=launch, knobs=knobs)
