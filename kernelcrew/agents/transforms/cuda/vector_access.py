"""Several elements per thread with vector loads and stores (float4 / double2; four
__half or __nv_bfloat16 as one 8-byte load).

A kernel that handles one index per thread (`T i = blockIdx.x*blockDim.x+threadIdx.x;
if (i >= N) return; work`) handles VEC consecutive indices per thread instead: the arrays
the work touches exactly at `[i]` (parameters of element type float or double) are loaded
as VEC/W vectors of W elements (16 bytes: one LDG.E.128 each), the work runs once per
element on registers, and the arrays written at `[i]` are stored as vectors. The vector
path runs when all VEC elements are in range and every vector address is 16-byte aligned
(checked at run time: an array may start anywhere); otherwise the original scalar work
runs for the (at most VEC) elements left, so tails and unaligned views stay correct. The
launch grid is divided by VEC (`ceil_div(grid, VEC)`).

Refused when the work synchronizes, uses shared memory, warp operations, atomics or the
thread built-ins, returns early or writes the index; when an array written at `[i]` is
also touched at another index (the vector store would race with it); or when nothing
would be vectorized.
"""

from __future__ import annotations

from typing import Any

from kernelcrew.agents.transforms.analysis.cuda_shapes import (
    blocker,
    dedent_block,
    element_type,
    indent,
    param_ref,
    per_index,
)
from kernelcrew.agents.transforms.kernel_files import Outcome, entries
from kernelcrew.csource.syntax import Edit, Node, Source, apply_edits, walk
from kernelcrew.kernels.kernelfile import KernelFile

# element type -> (the vector type it moves in, elements per vector): 16 bytes for float
# and double, 8 for the 16-bit floats (VEC = 4 of them per thread)
VEC_TYPES = {"float": ("float4", 4), "double": ("double2", 2), "__half": ("uint2", 4),
             "__nv_bfloat16": ("uint2", 4)}


def _index_text(s: Source, sub: Node) -> str:
    idx = sub.child_by_field_name("indices") or sub.child_by_field_name("index")
    text = s.text_of(idx).strip() if idx is not None else ""
    return text[1:-1].strip() if text.startswith("[") and text.endswith("]") else text


def _accesses(s: Source, pi, by_param: dict) -> tuple[dict[str, list[Node]],
                                                      dict[str, list[Node]],
                                                      dict[str, list[Node]]]:
    """The pointer parameters' uses in the work: (accesses at [i], any other use, writes),
    by parameter."""
    at_i: dict[str, list[Node]] = {}  # param -> its accesses at [i]
    elsewhere: dict[str, list[Node]] = {}
    writes: dict[str, list[Node]] = {}
    for st in pi.stmts:
        for n in walk(st):
            if n.type == "identifier" and (p := param_ref(pi.fn, n)) is not None and \
                    by_param[p].pointer is not None:
                par = n.parent
                if par.type == "subscript_expression" and par.child_by_field_name("argument") == n:
                    key = at_i if _index_text(s, par) == pi.var else elsewhere
                    key.setdefault(p, []).append(par)
                    gp = par.parent
                    if (gp.type == "assignment_expression" and gp.child_by_field_name("left")
                            == par) or gp.type == "update_expression":
                        writes.setdefault(p, []).append(par)
                else:
                    elsewhere.setdefault(p, []).append(n)
    return at_i, elsewhere, writes


def _vectorized(s: Source, by_param: dict, at_i: dict[str, list[Node]],
                elsewhere: dict[str, list[Node]], writes: dict[str, list[Node]]
                ) -> dict[str, str] | None:
    """The parameters loaded and stored as vectors (name -> element type): touched at [i]
    only, of a vector element type; None when an array written at [i] is touched elsewhere
    too (a vector store would race with that access)."""
    vec: dict[str, str] = {}
    for p in at_i:
        et = element_type(by_param[p], s)
        if et in VEC_TYPES:
            vec[p] = et
    for p in list(vec):
        if p in writes and p in elsewhere:
            return None  # a vector store would race with the other accesses
        if p in elsewhere:
            del vec[p]  # read at other indices too: the [i] reads stay scalar as well
    return vec


def vector_access(src: str, kernel: str, knob: str = "VEC") -> str | None:
    """The kernel with VEC elements per thread (see the module docstring), or None."""
    # stays long below the checks: it writes the new body, vector loads, lanes and tail,
    # top to bottom
    s = Source(src)
    pi = per_index(s, kernel)
    if pi is None or blocker(s, pi.stmts, pi.var) is not None:
        return None
    body_node = pi.fn.child_by_field_name("body")
    by_param = {p.name: p for p in pi.params}
    at_i, elsewhere, writes = _accesses(s, pi, by_param)
    vec = _vectorized(s, by_param, at_i, elsewhere, writes)
    if vec is None:
        return None
    if not vec or len(set(vec.values())) != 1:
        return None
    et = next(iter(vec.values()))
    vty, width = VEC_TYPES[et]
    written = [p for p in vec if p in writes]
    read = [p for p in vec if p not in writes or _needs_preload(s, pi, writes[p], body_node)]
    # names: lane registers and the first index
    names = {n.text.decode() for n in walk(pi.fn) if n.type == "identifier"}
    reg = {}
    for p in vec:
        r, k = f"{p}_v", 2
        while r in names:
            r, k = f"{p}_v{k}", k + 1
        reg[p] = r
    base, lane = "kc_i0", "kc_l"
    if base in names or lane in names:
        return None
    # the per-lane work: x[i] -> x_v[kc_l]
    start, end = pi.stmts[0].start_byte, pi.stmts[-1].end_byte
    edits = []
    for p in vec:
        for sub in at_i[p]:
            edits.append((sub.start_byte, sub.end_byte, f"{reg[p]}[{lane}]"))
    data = s.data[start:end]
    for a, b, t in sorted(edits, reverse=True):
        data = data[:a - start] + t.encode() + data[b - start:]
    pad = s.indent_of(pi.stmts[0])
    lane_work = "\n".join(ln[len(pad):] if ln.startswith(pad) else ln.lstrip()
                          for ln in (pad + data.decode()).split("\n"))
    scalar_work = dedent_block(s, pi.stmts)
    aligned = " | ".join(f"reinterpret_cast<unsigned long long>({p} + {base})" for p in vec)
    loads = []
    for p in vec:
        loads.append(f"alignas(16) {et} {reg[p]}[{knob}];")
    for p in read:
        ptr = by_param[p]
        fetch = (f"__ldg(reinterpret_cast<const {vty}*>({p} + {base}) + kc_v)"
                 if ptr.const and ptr.restrict else
                 f"reinterpret_cast<const {vty}*>({p} + {base})[kc_v]")
        loads.append(f"#pragma unroll\nfor (int kc_v = 0; kc_v < {knob} / {width}; ++kc_v)\n"
                     f"    reinterpret_cast<{vty}*>({reg[p]})[kc_v] = {fetch};")
    stores = [f"#pragma unroll\nfor (int kc_v = 0; kc_v < {knob} / {width}; ++kc_v)\n"
              f"    reinterpret_cast<{vty}*>({p} + {base})[kc_v] = "
              f"reinterpret_cast<const {vty}*>({reg[p]})[kc_v];" for p in written]
    ty, var = pi.ty, pi.var
    new_body = (
        f"{{\n"
        f"    static_assert({knob} % {width} == 0, \"{knob} must be a multiple of {width}\");\n"
        f"    {ty} {base} = ({pi.init}) * {knob};\n"
        f"    if ({base} >= {pi.bound}) return;\n"
        f"    if ({base} + {knob} <= {pi.bound} && (({aligned}) % sizeof({vty})) == 0) {{\n"
        f"{indent(chr(10).join(loads), ' ' * 8)}\n"
        f"        #pragma unroll\n"
        f"        for (int {lane} = 0; {lane} < {knob}; ++{lane}) {{\n"
        f"            {ty} {var} = {base} + {lane};\n"
        f"{indent(lane_work, ' ' * 12)}\n"
        f"        }}\n"
        + (f"{indent(chr(10).join(stores), ' ' * 8)}\n" if stores else "")
        + f"    }} else {{\n"
        f"        // the tail (or an unaligned start): the original work, element by element\n"
        f"        for ({ty} {var} = {base}; {var} < {pi.bound} && {var} < {base} + {knob}; "
        f"++{var}) {{\n"
        f"{indent(scalar_work, ' ' * 12)}\n"
        f"        }}\n"
        f"    }}\n"
        f"}}")
    out = apply_edits(s, [Edit(body_node.start_byte, body_node.end_byte, new_body)])
    if Source(out).has_errors():
        return None
    return out


def _unconditional(stmt: Node, body: Node) -> bool:
    """Only plain blocks between the statement and the function body (no if, no loop)."""
    p = stmt.parent
    while p is not None and p.start_byte != body.start_byte:
        if p.type != "compound_statement":
            return False
        p = p.parent
    return p is not None


def _needs_preload(s: Source, pi, subs: list[Node], body: Node) -> bool:
    """An array written at [i] must be loaded first unless every write is an unconditional
    top-level `a[i] = e;` of the work that comes before any read of it."""
    first_write = None
    for sub in subs:
        stmt = sub.parent.parent
        if sub.parent.type != "assignment_expression" or \
                sub.parent.child_by_field_name("operator").type != "=" or \
                stmt.type != "expression_statement" or not _unconditional(stmt, body):
            return True
        first_write = stmt.end_byte if first_write is None else min(first_write,
                                                                     stmt.end_byte)
    arr = s.text_of(subs[0].child_by_field_name("argument"))
    for st in pi.stmts:
        for n in walk(st):
            if n.type == "subscript_expression" and n not in subs and \
                    s.text_of(n.child_by_field_name("argument")) == arr and \
                    n.start_byte < (first_write or 0):
                return True
    return False


# ---------------------------------------------------------------- on a kernel file

def vector_access_in_file(kf: KernelFile, p: dict[str, Any]) -> Outcome | None:
    """VEC elements per thread in every kernel that takes them, their 1-D grids divided
    by the `knob`."""
    knob = str(p["knob"])
    body, changed = kf.body, set()
    for e in entries(kf):
        new = vector_access(body, e, knob)
        if new is not None:
            body = new
            changed.add(e)
    if not changed:
        return None
    launch = []
    for lc in kf.meta.launch:
        lc = lc.model_copy(deep=True)
        if lc.kernel in changed:
            if len(lc.grid) != 1:
                return None
            lc.grid = [f"ceil_div({lc.grid[0]}, {knob})"]
        launch.append(lc)
    value = kf.meta.knobs.get(knob, int(p["default"]))
    return Outcome(body=body, launch=launch, knobs={knob: value})
