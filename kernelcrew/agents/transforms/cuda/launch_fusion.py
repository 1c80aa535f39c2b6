"""Fusion of consecutive launches of a launch plan into one kernel.

Consecutive launches whose kernels each handle one index per thread over the same index
space (same grid and block expressions, the same guard bound once parameters are named
by the launch's arguments) become one kernel: one index, one guard, the kernels' work in
launch order, each in its own scope. A temp that only these launches use, written as
`t[i] = e;` (a top-level statement) before it is read, and read only as `t[i]`, becomes a
register: its round trip through memory disappears, and so does the temp. The launches
are merged in the front matter; kernels no longer launched are removed.

Legal because within one index the launches' statements ran in launch order anyway, and
across indices they did not communicate: every array the group writes is touched at
`[i]` only by the fused kernels (checked), so no thread reads what another wrote.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from kernelcrew.agents.transforms.analysis.cuda_shapes import (
    PerIndex,
    blocker,
    dedent_block,
    element_type,
    indent,
    norm,
    param_ref,
    per_index,
    top_node,
)
from kernelcrew.agents.transforms.kernel_files import Outcome
from kernelcrew.csource.syntax import (
    Edit,
    Node,
    Source,
    apply_edits,
    declarators,
    lookup,
    walk,
)
from kernelcrew.kernels.kernelfile import KernelFile, Launch, parse_kernel_text, render

_C_TYPES = {"float32": "float", "float64": "double", "int32": "int", "int64": "long long",
            "float16": "__half"}


@dataclass
class Fused:
    body: str
    launch: list[Launch]
    temps: dict
    kernel: str
    registers: list[str]  # temps that became registers


def _same_shape(a: Launch, b: Launch) -> bool:
    return ([norm(str(x)) for x in a.grid], [norm(str(x)) for x in a.block],
            norm(str(a.shared_bytes))) == ([norm(str(x)) for x in b.grid],
                                           [norm(str(x)) for x in b.block],
                                           norm(str(b.shared_bytes)))


def _arg_names(pi: PerIndex, lc: Launch) -> dict[str, str] | None:
    if len(pi.params) != len(lc.args) or len(set(lc.args)) != len(lc.args):
        return None  # an argument passed twice would alias two parameters
    return {p.name: a for p, a in zip(pi.params, lc.args, strict=True)}


def _subscripts_of(s: Source, pi: PerIndex, param: str) -> list[Node]:
    out = []
    for st in pi.stmts:
        for n in walk(st):
            if n.type == "subscript_expression":
                arr = n.child_by_field_name("argument")
                if arr is not None and arr.type == "identifier" and \
                        param_ref(pi.fn, arr) == param:
                    out.append(n)
            elif n.type == "identifier" and param_ref(pi.fn, n) == param:
                p = n.parent
                if p is None or p.type != "subscript_expression" or \
                        p.child_by_field_name("argument") != n:
                    out.append(n)  # used as a pointer value: not a plain element access
    return out


def _index_of(s: Source, sub: Node) -> str | None:
    if sub.type != "subscript_expression":
        return None
    idx = sub.child_by_field_name("indices") or sub.child_by_field_name("index")
    if idx is None:
        return None
    text = s.text_of(idx).strip()
    if text.startswith("[") and text.endswith("]"):
        text = text[1:-1].strip()
    return text


def _is_write(sub: Node) -> tuple[bool, bool]:
    """(written, read) for an element access."""
    p = sub.parent
    if p.type == "assignment_expression" and p.child_by_field_name("left") == sub:
        return True, p.child_by_field_name("operator").type != "="
    if p.type == "update_expression":
        return True, True
    return False, True


def fuse_launches(kf: KernelFile) -> Fused | None:
    """Fuse the first run of two or more fusable consecutive launches (None: none)."""
    s = Source(kf.body)
    launches = list(kf.meta.launch)
    shapes = {}
    for lc in launches:
        if lc.kernel not in shapes:
            pi = per_index(s, lc.kernel)
            shapes[lc.kernel] = pi if pi is not None and blocker(s, pi.stmts, pi.var) is None \
                else None
    start = 0
    while start < len(launches):
        end = start
        while end + 1 < len(launches) and _fusable(s, kf, launches, shapes, start, end + 1):
            end += 1
        if end > start:
            got = _fuse(s, kf, launches, shapes, start, end)
            if got is not None:
                return got
        start = end + 1
    return None


def _fusable(s: Source, kf: KernelFile, launches: list[Launch], shapes: dict, start: int,
             k: int) -> bool:
    a, b = launches[start], launches[k]
    pa, pb = shapes.get(a.kernel), shapes.get(b.kernel)
    if pa is None or pb is None or len(a.grid) != 1 or len(a.block) != 1:
        return False
    if not _same_shape(a, b):
        return False
    na, nb = _arg_names(pa, a), _arg_names(pb, b)
    if na is None or nb is None:
        return False
    bound_a = _bound_in_args(s, pa, na)
    bound_b = _bound_in_args(s, pb, nb)
    return bound_a is not None and bound_a == bound_b


def _bound_in_args(s: Source, pi: PerIndex, names: dict[str, str]) -> str | None:
    g = pi.guard.child_by_field_name("condition")
    c = g.named_children[0]
    side = c.child_by_field_name("right") if s.text_of(c.child_by_field_name("left")).strip() \
        == pi.var else c.child_by_field_name("left")
    out = []
    for tok in re.findall(r"[A-Za-z_]\w*|\S", s.text_of(side)):
        if re.match(r"[A-Za-z_]", tok):
            if tok not in names:
                return None  # a bound that is not made of parameters
            out.append(names[tok])
        else:
            out.append(tok)
    return norm(" ".join(out))


def _registers(s: Source, kf: KernelFile, group: list[Launch], others: list[Launch],
               kernels: list[PerIndex], names: list[dict[str, str]]) -> dict[str, str]:
    """The temps that become registers (temp -> register name): used by no launch outside
    the group, and in the group only at the launch's own index, written by a top-level
    statement before any launch reads them."""
    used_elsewhere = {a for lc in others for a in lc.args}
    registers: dict[str, str] = {}  # temp -> register name
    for t, spec in kf.meta.temps.items():
        if t in used_elsewhere or not any(t in lc.args for lc in group):
            continue
        ctype = _C_TYPES.get(spec.dtype)
        if ctype is None:
            continue
        written = False
        legal = True
        for pi, nm in zip(kernels, names, strict=True):
            params = [p for p, a in nm.items() if a == t]
            if not params:
                continue
            subs = _subscripts_of(s, pi, params[0])
            for sub in subs:
                if _index_of(s, sub) != pi.var:
                    legal = False
                    break
                w, r = _is_write(sub)
                if r and not written and not w:
                    legal = False  # read before any launch of the group wrote it
                if w:
                    stmt = sub.parent.parent
                    if r or stmt.type != "expression_statement" or \
                            stmt.parent != pi.fn.child_by_field_name("body") and \
                            stmt not in pi.stmts:
                        legal = False
            if not legal:
                break
            if any(_is_write(x)[0] for x in subs if x.type == "subscript_expression"):
                written = True
        if legal and written:
            registers[t] = f"{t}_r"
    return registers


def _shared_at_own_index(s: Source, kernels: list[PerIndex], names: list[dict[str, str]],
                         registers: dict[str, str]) -> bool:
    """Every other array that one launch of the group writes and another touches is
    accessed at the launch's own index in every launch (no thread reads another's
    element)."""
    # every other array that one launch of the group writes and another touches: every
    # access in every launch at the launch's own index (no thread reads another's element)
    users: dict[str, list[tuple[PerIndex, list[Node]]]] = {}
    for pi, nm in zip(kernels, names, strict=True):
        for p, a in nm.items():
            if a not in registers:
                users.setdefault(a, []).append((pi, _subscripts_of(s, pi, p)))
    for uses in users.values():
        if len(uses) < 2:
            continue
        written = any(_is_write(x)[0] for _, subs in uses for x in subs
                      if x.type == "subscript_expression")
        if written and any(_index_of(s, x) != pi.var for pi, subs in uses for x in subs):
            return False
    return True


def _names_clash(kernels: list[PerIndex], names: list[dict[str, str]],
                 registers: dict[str, str], var: str) -> bool:
    """In the fused kernel parameters are named by their launch arguments: a local of one
    kernel named like an argument another uses, like a register, or like the first
    kernel's index would clash."""
    taken = set()
    for pi in kernels:
        for st in pi.stmts:
            taken |= {n.text.decode() for n in walk(st) if n.type == "identifier"
                      and param_ref(pi.fn, n) is None}
    arg_names = {a for nm in names for a in nm.values()}
    if taken & (arg_names - {p for nm in names for p in nm}) - {pi.var for pi in kernels}:
        return True  # a local of one kernel has the name of an argument another kernel uses
    if taken & set(registers.values()):
        return True
    # a later kernel may already have a local named like the first one's index
    return any(pi.var != var and var in {n.text.decode() for st in pi.stmts for n in walk(st)
                                         if n.type == "identifier"} for pi in kernels)


def _fused_params(s: Source, kernels: list[PerIndex], names: list[dict[str, str]],
                  registers: dict[str, str]) -> dict[str, str]:
    """The fused kernel's parameter declarations by argument, in order of first use; an
    array some kernel writes takes that kernel's (non-const) declaration."""
    # the parameter list: arguments in order of first use; an array some kernel writes
    # takes that kernel's (non-const) declaration
    decls: dict[str, str] = {}
    for pi, nm in zip(kernels, names, strict=True):
        for p in pi.params:
            a = nm[p.name]
            if a in registers:
                continue
            text = _renamed_decl(s, p, a)
            if a not in decls or (p.pointer is not None and not p.const):
                decls[a] = text if a not in decls or not p.const else decls[a]
    return decls


def _fuse(s: Source, kf: KernelFile, launches: list[Launch], shapes: dict, start: int,
          end: int) -> Fused | None:
    """Launches start..end fused into one kernel (see the module docstring), or None where
    it is not legal or a name would clash."""
    group = launches[start:end + 1]
    others = launches[:start] + launches[end + 1:]
    kernels = [shapes[lc.kernel] for lc in group]
    names = [_arg_names(pi, lc) for pi, lc in zip(kernels, group, strict=True)]
    first = kernels[0]
    var, ty = first.var, first.ty
    registers = _registers(s, kf, group, others, kernels, names)
    if not _shared_at_own_index(s, kernels, names, registers) or \
            _names_clash(kernels, names, registers, var):
        return None
    decls = _fused_params(s, kernels, names, registers)
    args = list(decls)
    reg_types = {}
    for t in registers:
        reg_types[t] = _C_TYPES[kf.meta.temps[t].dtype]
    # the work of each launch, renamed
    parts = []
    for pi, nm in zip(kernels, names, strict=True):
        ren = dict(nm)
        ren[pi.var] = var
        text = _rewrite_work(s, pi, ren, {p: registers[a] for p, a in nm.items()
                                          if a in registers})
        parts.append(f"    {{  // {pi.name}\n{indent(text, '        ')}\n    }}")
    name = "fused_" + "_".join(re.sub(r"_kernel$", "", lc.kernel) for lc in group)
    name = name[:60]
    if re.search(rf"\b{name}\b", kf.body):
        return None
    bound = _bound_text(s, first, names[0])
    regs = "".join(f"    {reg_types[t]} {r};  // was the temp {t}\n"
                   for t, r in registers.items())
    new_fn = (f"// fused by kernelcrew: {', '.join(lc.kernel for lc in group)} "
              "(one launch)\n"
              f"extern \"C\" __global__ void {name}({', '.join(decls[a] for a in args)}) {{\n"
              f"    {ty} {var} = {first.init};\n"
              f"    if ({var} >= {bound}) return;\n"
              f"{regs}" + "\n".join(parts) + "\n}\n")
    # remove kernels no longer launched; the fused kernel takes the last one's place
    still = {lc.kernel for lc in others}
    edits = []
    removed = []
    for lc in group:
        if lc.kernel in still or lc.kernel in removed:
            continue
        removed.append(lc.kernel)
        top = top_node(shapes[lc.kernel].fn)
        end_b = top.end_byte
        if s.data[end_b:end_b + 1] == b"\n":
            end_b += 1
        edits.append(Edit(s.line_start(top), end_b, ""))
    at = len(s.data)
    if edits:
        last = max(edits, key=lambda e: e.start)
        edits.remove(last)
        edits.append(Edit(last.start, last.end, new_fn))
    else:
        edits.append(Edit(at, at, "\n" + new_fn))
    body = re.sub(r"\n{3,}", "\n\n", apply_edits(s, edits))
    if Source(body).has_errors():
        return None
    merged = Launch(kernel=name, grid=list(group[0].grid), block=list(group[0].block),
                    shared_bytes=group[0].shared_bytes, args=args)
    new_launch = launches[:start] + [merged] + launches[end + 1:]
    temps = {k: v for k, v in kf.meta.temps.items() if k not in registers}
    return Fused(body=body, launch=new_launch, temps=temps, kernel=name,
                 registers=list(registers))


def _renamed_decl(s: Source, p, new: str) -> str:
    """A parameter declaration with the parameter's name replaced."""
    last = None
    for n in walk(p.node):
        if n.type == "identifier" and n.text.decode() == p.name:
            last = n
    text = s.text_of(p.node)
    if last is None:
        return text
    a, b = last.start_byte - p.node.start_byte, last.end_byte - p.node.start_byte
    return text[:a] + new + text[b:]


def _bound_text(s: Source, pi: PerIndex, names: dict[str, str]) -> str:
    return re.sub(r"[A-Za-z_]\w*", lambda m: names.get(m.group(0), m.group(0)), pi.bound)


def _rewrite_work(s: Source, pi: PerIndex, ren: dict[str, str], regs: dict[str, str],
                  at: dict[int, str] | None = None) -> str:
    """The kernel's work with parameters renamed to arguments and temps to registers
    (`at`: accesses, by start byte, replaced by the given text)."""
    start, end = pi.stmts[0].start_byte, pi.stmts[-1].end_byte
    edits = []
    for st in pi.stmts:
        for n in walk(st):
            if at and n.type == "subscript_expression" and n.start_byte in at:
                edits.append((n.start_byte, n.end_byte, at[n.start_byte]))
            elif n.type == "subscript_expression":
                arr = n.child_by_field_name("argument")
                if arr is not None and arr.type == "identifier" and \
                        param_ref(pi.fn, arr) in regs:
                    edits.append((n.start_byte, n.end_byte, regs[param_ref(pi.fn, arr)]))
    for st in pi.stmts:
        for n in walk(st):
            if n.type != "identifier":
                continue
            if any(a <= n.start_byte < b for a, b, _ in edits):
                continue
            nm = n.text.decode()
            if param_ref(pi.fn, n) is not None or nm == pi.var:
                new = ren.get(nm)
                if new is not None and new != nm:
                    edits.append((n.start_byte, n.end_byte, new))
    data = s.data[start:end]
    for a, b, t in sorted(edits, reverse=True):
        data = data[:a - start] + t.encode() + data[b - start:]
    base = s.indent_of(pi.stmts[0])
    text = base + data.decode()
    return "\n".join(ln[len(base):] if ln.startswith(base) else ln.lstrip()
                     for ln in text.split("\n"))


# ---------------------------------------------------------------- rows, then their elements

def _may_write_through(s: Source, pi: PerIndex, param: str, uses: list[Node]) -> bool:
    """A pointer parameter used other than by subscript may be written through that use
    unless it points to const and no cast takes the const away."""
    p = next((x for x in pi.params if x.name == param), None)
    for n in uses:
        if n.type == "subscript_expression":
            continue
        if p is None or not p.const:
            return True
        c = n.parent
        while c is not None and c.type == "parenthesized_expression":
            c = c.parent
        if c is not None and c.type == "cast_expression" and \
                "const" not in s.text_of(c.child_by_field_name("type")):
            return True
    return False


def _row_split(s: Source, pa: PerIndex, pb: PerIndex, na: dict[str, str],
               nb: dict[str, str]) -> str | None:
    """B's parameter that holds C when A runs over R indices and B over R*C (bounds in
    the launches' arguments); None otherwise."""
    ra, rb = _bound_in_args(s, pa, na), _bound_in_args(s, pb, nb)
    if ra is None or rb is None:
        return None
    inv = {a: p for p, a in nb.items()}
    for c_arg in set(nb.values()):
        if c_arg in inv and re.fullmatch(r"[A-Za-z_]\w*", c_arg) and \
                rb in (norm(f"({ra})*{c_arg}"), norm(f"{c_arg}*({ra})"), norm(f"{ra}*{c_arg}"),
                       norm(f"{c_arg}*{ra}")):
            return inv[c_arg]
    return None


def _row_index(s: Source, pb: PerIndex, sub: Node, c_param: str) -> bool:
    """B reads at its element's row: `[i / C]`, or through a local initialized so."""
    text = _index_of(s, sub)
    want = norm(f"{pb.var}/{c_param}")
    if text is None:
        return False
    if norm(text) == want:
        return True
    idx = sub.child_by_field_name("indices") or sub.child_by_field_name("index")
    ident = idx.named_children[0] if idx is not None and idx.named_children else None
    if ident is None or ident.type != "identifier":
        return False
    d = lookup(ident.text.decode(), ident)
    return d is not None and not d.param and d.init is not None and \
        norm(s.text_of(d.init)) == want and not _assigned(pb, d.name)


def _assigned(pi: PerIndex, name: str) -> bool:
    for st in pi.stmts:
        for n in walk(st):
            t = n.child_by_field_name("left") if n.type == "assignment_expression" else \
                n.child_by_field_name("argument") if n.type == "update_expression" else None
            if t is not None and t.type == "identifier" and t.text.decode() == name:
                return True
    return False


def _rows_elements_legal(s: Source, kf: KernelFile, pa: PerIndex, pb: PerIndex,
                         na: dict[str, str], nb: dict[str, str], c_param: str,
                         others: list[Launch]) -> dict[str, str] | None:
    """The temps that become registers, when B may run inside A's thread for A's row; None
    when it may not (see `fuse_rows_elements`)."""
    used_elsewhere = {a for lc in others for a in lc.args}
    arrays_a = {a: p for p, a in na.items() if any(x.name == p and x.pointer is not None
                                                   for x in pa.params)}
    arrays_b = {a: p for p, a in nb.items() if any(x.name == p and x.pointer is not None
                                                   for x in pb.params)}
    registers: dict[str, str] = {}
    for arg in set(arrays_a) | set(arrays_b):
        sa = _subscripts_of(s, pa, arrays_a[arg]) if arg in arrays_a else []
        sb = _subscripts_of(s, pb, arrays_b[arg]) if arg in arrays_b else []
        if (arg in arrays_a and _may_write_through(s, pa, arrays_a[arg], sa)) or \
                (arg in arrays_b and _may_write_through(s, pb, arrays_b[arg], sb)):
            return None
        wa = any(x.type == "subscript_expression" and _is_write(x)[0] for x in sa)
        wb = any(x.type == "subscript_expression" and _is_write(x)[0] for x in sb)
        if wb and (sa or any(x.type != "subscript_expression" or _index_of(s, x) != pb.var
                             for x in sb)):
            return None  # B writes it: only at its own element, and A never touches it
        if wa and sb:
            if any(x.type != "subscript_expression" or _is_write(x)[0] or
                   not _row_index(s, pb, x, c_param) for x in sb):
                return None  # B reads what A wrote only at its element's row
            if any(x.type != "subscript_expression" or _index_of(s, x) != pa.var for x in sa):
                return None
            spec = kf.meta.temps.get(arg)
            if spec is not None and arg not in used_elsewhere and \
                    _C_TYPES.get(spec.dtype) is not None and _top_level_writes(s, pa, sa):
                registers[arg] = f"{arg}_r"
    return registers


def _top_level_writes(s: Source, pi: PerIndex, subs: list[Node]) -> bool:
    """Every access is a plain `t[i] = e;` among the kernel's top-level statements, the
    first before any read."""
    writes = [x for x in subs if _is_write(x)[0]]
    if not writes:
        return False
    for x in subs:
        w, r = _is_write(x)
        stmt = x.parent.parent
        if w and (r or stmt not in pi.stmts):
            return False
        if not w and x.start_byte < writes[0].start_byte:
            return False
    return True


def fuse_rows_elements(kf: KernelFile) -> Fused | None:
    """Consecutive launches A over R indices (a row each) and B over R*C (an element
    each), B reading what A wrote only at its element's row (`[e / C]`): one launch of
    A's shape in which each thread, after A's work for its row, runs B's work for the
    row's C elements in a loop. Temps that only the two use, A writes as `t[r] = e;`
    and B reads at the row, become registers. None where no such pair is found."""
    s = Source(kf.body)
    launches = list(kf.meta.launch)
    for k in range(len(launches) - 1):
        a, b = launches[k], launches[k + 1]
        if len(a.grid) != 1 or len(a.block) != 1 or len(b.grid) != 1 or len(b.block) != 1 \
                or a.kernel == b.kernel:
            continue
        pa, pb = per_index(s, a.kernel), per_index(s, b.kernel)
        if pa is None or pb is None or blocker(s, pa.stmts, pa.var) is not None or \
                blocker(s, pb.stmts, pb.var) is not None:
            continue
        na, nb = _arg_names(pa, a), _arg_names(pb, b)
        if na is None or nb is None:
            continue
        c_param = _row_split(s, pa, pb, na, nb)
        if c_param is None:
            continue
        others = launches[:k] + launches[k + 2:]
        registers = _rows_elements_legal(s, kf, pa, pb, na, nb, c_param, others)
        if registers is None:
            continue
        got = _write_rows_elements(s, kf, launches, k, pa, pb, na, nb, c_param, registers)
        if got is not None:
            return got
    return None


def _write_rows_elements(s: Source, kf: KernelFile, launches: list[Launch], k: int,
                         pa: PerIndex, pb: PerIndex, na: dict[str, str], nb: dict[str, str],
                         c_param: str, registers: dict[str, str]) -> Fused | None:
    a, b = launches[k], launches[k + 1]
    kernels, names = [pa, pb], [na, nb]
    if _names_clash(kernels, names, registers, pa.var):
        return None
    taken = {n.text.decode() for pi in kernels for st in pi.stmts for n in walk(st)
             if n.type == "identifier"}
    evar = "kc_e" if pb.var in taken - {pb.var} or pb.var == pa.var else pb.var
    if "kc_e" in taken or "kc_c" in taken:
        return None
    # A's work runs at the top of the fused kernel: a name B takes from outside itself
    # (a macro, a global) must not be one of A's locals
    locals_a = {d[0] for st in pa.stmts if st.type == "declaration" for d in declarators(st)}
    outside_b = {n.text.decode() for st in pb.stmts for n in walk(st)
                 if n.type == "identifier" and lookup(n.text.decode(), n) is None}
    if locals_a & (outside_b | {evar, pb.var}):
        return None
    decls = _fused_params(s, kernels, names, registers)
    regs = "".join(f"    {_C_TYPES[kf.meta.temps[t].dtype]} {r};  // was the temp {t}\n"
                   for t, r in registers.items())
    ren_a = dict(na)
    text_a = _rewrite_work(s, pa, ren_a, {p: registers[x] for p, x in na.items()
                                          if x in registers})
    ren_b = dict(nb)
    ren_b[pb.var] = evar
    text_b = _rewrite_work(s, pb, ren_b, {p: registers[x] for p, x in nb.items()
                                          if x in registers})
    c_arg = nb[c_param]
    name = f"fused_{re.sub(r'_kernel$', '', a.kernel)}_{re.sub(r'_kernel$', '', b.kernel)}"[:60]
    if re.search(rf"\b{name}\b", kf.body):
        return None
    bound = _bound_text(s, pa, na)
    new_fn = (f"// fused by kernelcrew: {a.kernel}, then {b.kernel} over the row's elements "
              "(one launch)\n"
              f"extern \"C\" __global__ void {name}({', '.join(decls.values())}) {{\n"
              f"    {pa.ty} {pa.var} = {pa.init};\n"
              f"    if ({pa.var} >= {bound}) return;\n"
              f"{regs}"
              f"    // {a.kernel}\n{indent(text_a, '    ')}\n"
              f"    for ({pb.ty} kc_c = 0; kc_c < {c_arg}; ++kc_c) {{  // {b.kernel}, "
              "the row's elements\n"
              f"        const {pb.ty} {evar} = ({pb.ty}){pa.var} * {c_arg} + kc_c;\n"
              f"{indent(text_b, '        ')}\n    }}\n}}\n")
    still = {lc.kernel for i, lc in enumerate(launches) if i not in (k, k + 1)}
    edits, removed = [], []
    for pi in kernels:
        if pi.name in still or pi.name in removed:
            continue
        removed.append(pi.name)
        top = top_node(pi.fn)
        end_b = top.end_byte + (1 if s.data[top.end_byte:top.end_byte + 1] == b"\n" else 0)
        edits.append(Edit(s.line_start(top), end_b, ""))
    if edits:
        last = max(edits, key=lambda e: e.start)
        edits.remove(last)
        edits.append(Edit(last.start, last.end, new_fn))
    else:
        edits.append(Edit(len(s.data), len(s.data), "\n" + new_fn))
    body = re.sub(r"\n{3,}", "\n\n", apply_edits(s, edits))
    if Source(body).has_errors():
        return None
    merged = Launch(kernel=name, grid=list(a.grid), block=list(a.block),
                    shared_bytes=a.shared_bytes, args=list(decls))
    temps = {t: v for t, v in kf.meta.temps.items() if t not in registers}
    return Fused(body=body, launch=launches[:k] + [merged] + launches[k + 2:], temps=temps,
                 kernel=name, registers=list(registers))


# ---------------------------------------------------------------- through shared memory

MAX_HALO = 32


def _offset(s: Source, pi: PerIndex, sub: Node) -> int | None:
    """c of an access at `[i + c]` / `[i - c]` / `[c + i]` / `[i]` (integer c), else None."""
    text = _index_of(s, sub)
    if text is None:
        return None
    t = norm(text).strip("()")
    if t == pi.var:
        return 0
    m = re.fullmatch(rf"{re.escape(pi.var)}([+-])(\d+)|(\d+)\+{re.escape(pi.var)}", t)
    if m is None:
        return None
    if m.group(3) is not None:
        return int(m.group(3))
    return int(m.group(2)) * (1 if m.group(1) == "+" else -1)


def _staged_temp(s: Source, kf: KernelFile, pa: PerIndex, pb: PerIndex, na: dict[str, str],
                 nb: dict[str, str], others: list[Launch]) -> tuple[str, int, dict] | None:
    """(the temp, the halo, B's accesses of it -> offset) when A only produces one temp
    (`t[i] = e;`) that B reads at neighbouring indices and nothing else passes between
    them; None otherwise."""
    used_elsewhere = {a for lc in others for a in lc.args}
    arrays_a = {a: p for p, a in na.items() if any(x.name == p and x.pointer is not None
                                                   for x in pa.params)}
    arrays_b = {a: p for p, a in nb.items() if any(x.name == p and x.pointer is not None
                                                   for x in pb.params)}
    temp = None
    for arg, param_a in arrays_a.items():
        sa = _subscripts_of(s, pa, param_a)
        if _may_write_through(s, pa, param_a, sa):
            return None
        if any(x.type == "subscript_expression" and _is_write(x)[0] for x in sa):
            if temp is not None or arg not in kf.meta.temps or arg in used_elsewhere or \
                    _C_TYPES.get(kf.meta.temps[arg].dtype) is None or \
                    not _top_level_writes(s, pa, sa) or \
                    any(x.type != "subscript_expression" or _index_of(s, x) != pa.var
                        for x in sa):
                return None  # A writes something else too, or not t[i] = e
            temp = arg
    if temp is None or temp not in arrays_b:
        return None
    offsets = {}
    for x in _subscripts_of(s, pb, arrays_b[temp]):
        off = _offset(s, pb, x) if x.type == "subscript_expression" else None
        if off is None or _is_write(x)[0] or abs(off) > MAX_HALO:
            return None
        offsets[x.start_byte] = off
    if not any(offsets.values()):
        return None  # all at B's own index: the register fusion's case
    for arg, param_b in arrays_b.items():  # B's own outputs: at its index only, not A's
        if arg == temp:
            continue
        sb = _subscripts_of(s, pb, param_b)
        if _may_write_through(s, pb, param_b, sb):
            return None
        if any(x.type == "subscript_expression" and _is_write(x)[0] for x in sb) and \
                (arg in arrays_a or any(x.type != "subscript_expression" or
                                        _index_of(s, x) != pb.var for x in sb)):
            return None
    return temp, max(abs(o) for o in offsets.values()), offsets


def fuse_through_shared(kf: KernelFile) -> Fused | None:
    """Consecutive launches over the same index space where A produces a temp that B
    reads at neighbouring indices (`t[i - 1]`, `t[i + 2]`): one launch in which each
    block first computes A's values for its indices and a halo of H on either side into
    shared memory (A's work rerun for the halo, which only reads), synchronizes, and runs
    B's work reading them there. The temp disappears. None where no such pair is."""
    s = Source(kf.body)
    launches = list(kf.meta.launch)
    shapes = {lc.kernel: per_index(s, lc.kernel) for lc in launches}
    shapes = {k: v for k, v in shapes.items()
              if v is not None and blocker(s, v.stmts, v.var) is None}
    for k in range(len(launches) - 1):
        a, b = launches[k], launches[k + 1]
        if not _fusable(s, kf, launches, shapes, k, k + 1) or a.kernel == b.kernel:
            continue
        block = str(a.block[0])
        if not (block.isdigit() or block in kf.meta.knobs):
            continue  # the staged array's size must be known when compiling
        pa, pb = shapes[a.kernel], shapes[b.kernel]
        na, nb = _arg_names(pa, a), _arg_names(pb, b)
        got = _staged_temp(s, kf, pa, pb, na, nb, launches[:k] + launches[k + 2:])
        if got is None or _names_clash([pa, pb], [na, nb], {}, pb.var):
            continue
        out = _write_staged(s, kf, launches, k, pa, pb, na, nb, block, *got)
        if out is not None:
            return out
    return None


def _write_staged(s: Source, kf: KernelFile, launches: list[Launch], k: int, pa: PerIndex,
                  pb: PerIndex, na: dict[str, str], nb: dict[str, str], block: str,
                  temp: str, halo: int, offsets: dict[int, int]) -> Fused | None:
    a, b = launches[k], launches[k + 1]
    taken = {n.text.decode() for pi in (pa, pb) for st in pi.stmts for n in walk(st)
             if n.type == "identifier"}
    if {"kc_stage", "kc_s", "kc_b0"} & taken:
        return None
    ty = _C_TYPES[kf.meta.temps[temp].dtype]
    decls = _fused_params(s, [pa, pb], [na, nb], {temp: "kc_stage"})
    text_a = _rewrite_work(s, pa, dict(na), {p: "kc_stage[kc_s]" for p, x in na.items()
                                             if x == temp})
    text_b = _rewrite_work(s, pb, dict(nb), {}, at={
        st: f"kc_stage[threadIdx.x + {halo + off}]" for st, off in offsets.items()})
    name = f"fused_{re.sub(r'_kernel$', '', a.kernel)}_{re.sub(r'_kernel$', '', b.kernel)}"[:60]
    if re.search(rf"\b{name}\b", kf.body):
        return None
    ity = pb.ty
    new_fn = (f"// fused by kernelcrew: {a.kernel}, {b.kernel} (one launch; {a.kernel}'s values "
              f"staged in shared memory with a halo of {halo} for {b.kernel}'s neighbours)\n"
              f"extern \"C\" __global__ void {name}({', '.join(decls.values())}) {{\n"
              f"    __shared__ {ty} kc_stage[{block} + {2 * halo}];  // was the temp {temp}\n"
              f"    const {ity} kc_b0 = ({ity})blockIdx.x * blockDim.x;\n"
              f"    for (int kc_s = threadIdx.x; kc_s < (int)blockDim.x + {2 * halo}; "
              "kc_s += blockDim.x) {\n"
              f"        const {pa.ty} {pa.var} = kc_b0 - {halo} + kc_s;\n"
              f"        if ({pa.var} < 0 || {pa.var} >= {_bound_text(s, pa, na)}) continue;\n"
              f"{indent(text_a, '        ')}\n"
              "    }\n"
              "    __syncthreads();\n"
              f"    const {ity} {pb.var} = kc_b0 + threadIdx.x;\n"
              f"    if ({pb.var} >= {_bound_text(s, pb, nb)}) return;\n"
              f"{indent(text_b, '    ')}\n}}\n")
    still = {lc.kernel for i, lc in enumerate(launches) if i not in (k, k + 1)}
    edits, removed = [], []
    for pi in (pa, pb):
        if pi.name in still or pi.name in removed:
            continue
        removed.append(pi.name)
        top = top_node(pi.fn)
        end_b = top.end_byte + (1 if s.data[top.end_byte:top.end_byte + 1] == b"\n" else 0)
        edits.append(Edit(s.line_start(top), end_b, ""))
    if edits:
        last = max(edits, key=lambda e: e.start)
        edits.remove(last)
        edits.append(Edit(last.start, last.end, new_fn))
    else:
        edits.append(Edit(len(s.data), len(s.data), "\n" + new_fn))
    body = re.sub(r"\n{3,}", "\n\n", apply_edits(s, edits))
    if Source(body).has_errors():
        return None
    merged = Launch(kernel=name, grid=list(a.grid), block=list(a.block),
                    shared_bytes=a.shared_bytes, args=list(decls))
    temps = {t: v for t, v in kf.meta.temps.items() if t != temp}
    return Fused(body=body, launch=launches[:k] + [merged] + launches[k + 2:], temps=temps,
                 kernel=name, registers=[])


__all__ = ["Fused", "dedent_block", "element_type", "fuse_launches", "fuse_rows_elements",
           "fuse_through_shared"]


# ---------------------------------------------------------------- on a kernel file

def launch_fusion_in_file(kf: KernelFile, p: dict[str, Any]) -> Outcome | None:
    """Fuse launches until none is left to fuse (at most 8 rounds)."""
    out, changed = kf, None
    for _ in range(8):  # fuse runs until none is left
        got = fuse_launches(out) or fuse_rows_elements(out) or fuse_through_shared(out)
        if got is None:
            break
        changed = got
        meta = out.meta.model_copy(deep=True)
        meta.launch, meta.temps = got.launch, got.temps
        out = parse_kernel_text(render(meta, got.body), "cuda")
    if changed is None:
        return None
    return Outcome(body=out.body, launch=list(out.meta.launch), temps=dict(out.meta.temps))
