"""Matmul-like CUDA kernels as the tiling moves read them: one thread per output element,
the output's coordinates taken from the thread index, and one product loop.

Recognized (`dot_kernel`), in either of the forms such code is written in:

- flat: `T idx = blockIdx.x*blockDim.x + threadIdx.x; if (idx >= B*M*N) return;` and the
  coordinates as mixed-radix digits of idx (`j = idx % N; i = (idx / N) % M; p = idx /
  (M*N)`, in any order, through intermediate quotients too);
- 2-D: `row = blockIdx.y*blockDim.y + threadIdx.y; col = blockIdx.x*blockDim.x +
  threadIdx.x;` and a guard on both (`if (row < M && col < N) { ... }` or the early
  return);

then declarations (the accumulator, pointers into the operands, other locals), one loop
`for (q = 0; q < K; ++q) acc += L * R;` (or `acc = acc + L * R`, `acc = fmaf(L, R, acc)`)
in which L and R each read one element of an operand (a conversion or `__ldg` around it
allowed), and the statements that use the sum (the store of the output, an epilogue).

Each operand's offset must be affine in q, the coordinates and the sizes: A moves with q
and one coordinate (the row), B with q and another (the column); the other coordinates are
batch digits. `why_not_dot` says in one sentence why a kernel is not of the form.

The moves that tile such a kernel (`matmul_tile`, `tensor_core`) rebuild it around the
same pieces: `operand_load` writes an operand's element at tile coordinates, `per_output`
runs the original declarations and epilogue for one output, unchanged.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from kernelcrew.agents.transforms.analysis.cuda_shapes import (
    THREAD_WORDS,
    blocker,
    element_type,
    norm,
    per_index,
)
from kernelcrew.csource.affine import (
    VAR_MARK,
    FunctionModel,
    Poly,
    p_add,
    p_derivative,
    p_mul,
    p_sym,
)
from kernelcrew.csource.syntax import (
    Node,
    Param,
    Source,
    declarators,
    find_function,
    lookup,
    loops_in,
    params,
    walk,
)

_ROW_FORMS = {f"blockIdx.{d}*blockDim.{d}+threadIdx.{d}" for d in "xy"} | \
    {f"blockDim.{d}*blockIdx.{d}+threadIdx.{d}" for d in "xy"} | \
    {f"threadIdx.{d}+blockIdx.{d}*blockDim.{d}" for d in "xy"} | \
    {f"threadIdx.{d}+blockDim.{d}*blockIdx.{d}" for d in "xy"}
_ZERO = re.compile(r"^\(?\s*(0|0\.0*|0\.0*f|0\.f|0f|0\.0*F)\s*\)?$")
INDEX = "long long"  # the generated index arithmetic: 64-bit whatever the kernel used


@dataclass
class Operand:
    """One factor of the product: `root[off]` with off = base + q*stride_q + x*stride_x
    (x: the row for A, the column for B)."""

    root: str  # the parameter
    elem: str  # its element type
    load: Node  # the access (`a[...]`, or `__ldg(&a[...])` whole)
    factor: Node  # the factor of the product that holds it
    stride_q: Poly
    stride_x: Poly
    base: Poly  # the rest: batch digits and sizes


@dataclass
class DotKernel:
    fn: Node
    name: str
    form: str  # "flat" | "2d"
    flat: str | None  # the flat index variable (flat form)
    digits: dict[str, Poly]  # coordinate -> its weight in the flat index (flat form)
    ranges: dict[str, Poly]  # coordinate -> its range (size parameters)
    row: str
    col: str
    batch: list[str]  # lowest digit first
    pre: list[Node]  # the declarations before the loop (the accumulator's left out)
    acc: str
    acc_type: str
    acc_init: str | None  # None: zero
    loop: Node
    qvar: str
    k_bound: str
    update: Node  # the loop's one statement
    a: Operand
    b: Operand
    post: list[Node]  # the statements after the loop
    params: list[Param] = field(default_factory=list)

    def range_text(self, coord: str) -> str:
        return poly_c(self.ranges[coord])


# ---------------------------------------------------------------- polynomials as C

def poly_c(p: Poly, names: dict[str, str] | None = None) -> str:
    """A polynomial as C with 64-bit arithmetic; `names` renames symbols."""
    if not p:
        return "0"
    names = names or {}
    terms = []
    for m, c in sorted(p.items()):
        syms = [names.get(s.split(VAR_MARK)[0], s.split(VAR_MARK)[0]) for s in m]
        factors = ([f"({INDEX})({syms[0]})"] + [f"({s})" for s in syms[1:]]) if syms else []
        if not factors:
            terms.append(f"({INDEX}){c}")
        elif c == 1:
            terms.append(" * ".join(factors))
        else:
            terms.append(" * ".join([f"({INDEX}){c}", *factors]))
    return " + ".join(terms)


def poly_names(p: Poly) -> set[str]:
    return {s.split(VAR_MARK)[0] for m in p for s in m}


def _sub(p: Poly, sym: str, by: Poly) -> Poly:
    """p with the symbol `sym` replaced by the polynomial `by`."""
    out: Poly = {}
    for m, c in p.items():
        term: Poly = {tuple(s for s in m if s != sym): c}
        for _ in range(m.count(sym)):
            term = p_mul(term, by)
        out = p_add(out, term)
    return out


def _div(p: Poly, d: Poly) -> Poly | None:
    """p / d for monomials (a product of sizes divided by part of it); None otherwise."""
    if len(p) != 1 or len(d) != 1:
        return None
    (mp, cp), = p.items()
    (md, cd), = d.items()
    rest = list(mp)
    for s in md:
        if s not in rest:
            return None
        rest.remove(s)
    if cd == 0 or cp % cd:
        return None
    return {tuple(rest): cp // cd}


# ---------------------------------------------------------------- the coordinates

def _strip(n: Node | None) -> Node | None:
    while n is not None and n.type == "parenthesized_expression" and n.named_children:
        n = n.named_children[0]
    return n


def _product(m: FunctionModel, n: Node, region: Node) -> Poly | None:
    """A size expression: a product of names and integers (one monomial)."""
    p = m.linear(n, region)
    return p if p is not None and len(p) == 1 else None


def _digit_of(s: Source, m: FunctionModel, e: Node, quot: dict[str, Poly], region: Node
              ) -> tuple[Poly, Poly | None] | None:
    """(divisor, modulus) of `(idx / D) % E` forms; quot holds the unbounded quotients
    known so far (idx itself: divisor 1)."""
    e = _strip(e)
    while e is not None and e.type == "cast_expression":
        e = _strip(e.child_by_field_name("value"))
    if e is None:
        return None
    if e.type == "identifier" and e.text.decode() in quot:
        return quot[e.text.decode()], None
    if e.type != "binary_expression":
        return None
    op = e.child_by_field_name("operator").type
    if op not in ("/", "%"):
        return None
    left = _digit_of(s, m, e.child_by_field_name("left"), quot, region)
    by = _product(m, e.child_by_field_name("right"), region)
    if left is None or by is None or left[1] is not None:
        return None
    return (p_mul(left[0], by), None) if op == "/" else (left[0], by)


def _flat_coords(s: Source, m: FunctionModel, var: str, bound: Poly, stmts: list[Node],
                 region: Node) -> tuple[dict[str, Poly], dict[str, Poly], dict[str, Poly],
                                        list[Node]] | str:
    """(digit weights, ranges, quotient expansions, the declarations used) of the
    coordinates decoded from the flat index; a reason when they are not mixed-radix."""
    quot: dict[str, Poly] = {var: {(): 1}}
    bounded: dict[str, tuple[Poly, Poly]] = {}
    for st in stmts:
        if st.type != "declaration":
            continue
        for name, init, ptr, arr in declarators(st):
            if init is None or ptr or arr:
                continue
            got = _digit_of(s, m, init, quot, region)
            if got is None:
                continue
            d, e = got
            if e is None:
                quot[name] = d
            else:
                bounded[name] = (d, e)
    # the digits: bounded ones lowest first, then the top quotient
    order = sorted(bounded.items(), key=lambda kv: sum(len(mm) for mm in kv[1][0]))
    weights: dict[str, Poly] = {}
    ranges: dict[str, Poly] = {}
    w: Poly = {(): 1}
    for name, (d, e) in order:
        if d != w:
            return f"the coordinate {name} is not a digit of {var} (its divisor is not the " \
                "product of the ranges below it)"
        weights[name], ranges[name] = d, e
        w = p_mul(w, e)
    top_range = _div(bound, w)
    if top_range is None:
        return f"the guard's bound is not a multiple of the digits' span {poly_c(w)}"
    tops = [n for n, d in quot.items() if n != var and d == w] or \
        ([var] if w == {(): 1} else [])  # one coordinate: the index itself
    if top_range != {(): 1}:
        if not tops:
            return f"no coordinate holds {var} / ({poly_c(w)})"
        weights[tops[0]], ranges[tops[0]] = w, top_range
    # the other quotients, as sums of digits (bt = idx / C = b*T + t)
    expand: dict[str, Poly] = {}
    for n, d in quot.items():
        if n in weights:
            continue
        total: Poly = {}
        for c, wc in weights.items():
            if c == n:
                continue
            rel = _div(wc, d)
            if rel is not None:
                total = p_add(total, p_mul(p_sym(c), rel))
            elif _div(d, wc) is None:
                return f"{n} mixes digits of {var}"
        expand[n] = total
    used = [st for st in stmts if st.type == "declaration" and
            any(nm in weights or nm in expand for nm, *_ in declarators(st))]
    return weights, ranges, expand, used


def _thread_coord(s: Source, st: Node) -> tuple[str, str] | None:
    """(name, axis) of `T row = blockIdx.y * blockDim.y + threadIdx.y;`."""
    if st.type != "declaration":
        return None
    ds = list(declarators(st))
    if len(ds) != 1 or ds[0][1] is None or ds[0][2] or ds[0][3]:
        return None
    text = norm(s.text_of(ds[0][1]))
    if text not in _ROW_FORMS:
        return None
    return ds[0][0], text[-1]


def _conjuncts(n: Node) -> list[Node]:
    n = _strip(n)
    if n.type == "binary_expression" and n.child_by_field_name("operator").type == "&&":
        return _conjuncts(n.child_by_field_name("left")) + \
            _conjuncts(n.child_by_field_name("right"))
    return [n]


def _two_d(s: Source, fn: Node) -> tuple[str, str, Node, Node, list[Node]] | str:
    """(row, col, M, N, the work) of the 2-D form; a reason otherwise."""
    body = [c for c in fn.child_by_field_name("body").named_children if c.type != "comment"]
    coords = {}
    k = 0
    while k < len(body) and (got := _thread_coord(s, body[k])) is not None:
        coords[got[1]] = got[0]
        k += 1
    if set(coords) != {"x", "y"} or k >= len(body):
        return "no thread index (blockIdx.x*blockDim.x + threadIdx.x, or a row from .y and " \
            "a column from .x)"
    g = body[k]
    if g.type != "if_statement" or g.child_by_field_name("alternative") is not None:
        return "the thread coordinates are not guarded by one if"
    cond = g.child_by_field_name("condition").named_children[0]
    cons = g.child_by_field_name("consequence")
    early = cons.type == "return_statement" and not cons.named_children
    bounds = {}
    if early:
        parts = [_strip(cond)]
        if parts[0].type == "binary_expression" and \
                parts[0].child_by_field_name("operator").type == "||":
            parts = [_strip(parts[0].child_by_field_name("left")),
                     _strip(parts[0].child_by_field_name("right"))]
        want = ">="
        work = body[k + 1:]
    else:
        parts = _conjuncts(cond)
        want = "<"
        if k + 1 != len(body):
            return "statements after the guarded block"
        work = [c for c in cons.named_children if c.type != "comment"] \
            if cons.type == "compound_statement" else [cons]
    for c in parts:
        if c.type != "binary_expression" or c.child_by_field_name("operator").type != want:
            return "the guard is not a bound on each coordinate"
        lt = s.text_of(c.child_by_field_name("left")).strip()
        if lt not in coords.values():
            return "the guard is not a bound on each coordinate"
        bounds[lt] = c.child_by_field_name("right")
    if set(bounds) != set(coords.values()):
        return "the guard does not bound both coordinates"
    return coords["y"], coords["x"], bounds[coords["y"]], bounds[coords["x"]], work


# ---------------------------------------------------------------- the product loop

def _update_parts(s: Source, st: Node, acc_names: set[str]
                  ) -> tuple[str, Node, Node] | None:
    """(acc, L, R) of `acc += L * R;`, `acc = acc + L * R;`, `acc = fmaf(L, R, acc);`."""
    if st.type == "compound_statement":
        inner = [c for c in st.named_children if c.type != "comment"]
        if len(inner) != 1:
            return None
        st = inner[0]
    if st.type != "expression_statement" or not st.named_children:
        return None
    e = st.named_children[0]
    if e.type != "assignment_expression":
        return None
    left = e.child_by_field_name("left")
    if left.type != "identifier" or left.text.decode() not in acc_names:
        return None
    acc = left.text.decode()
    op = e.child_by_field_name("operator").type
    right = _strip(e.child_by_field_name("right"))
    prod = None
    if op == "+=":
        prod = right
    elif op == "=" and right.type == "binary_expression" and \
            right.child_by_field_name("operator").type == "+":
        a, b = right.child_by_field_name("left"), right.child_by_field_name("right")
        if s.text_of(a).strip() == acc:
            prod = _strip(b)
        elif s.text_of(b).strip() == acc:
            prod = _strip(a)
    elif op == "=" and right.type == "call_expression" and \
            s.text_of(right.child_by_field_name("function")).strip() in ("fmaf", "fma", "__fmaf_rn"):
        args = right.child_by_field_name("arguments").named_children
        if len(args) == 3 and s.text_of(args[2]).strip() == acc:
            return acc, args[0], args[1]
    if prod is None or prod.type != "binary_expression" or \
            prod.child_by_field_name("operator").type != "*":
        return None
    return acc, prod.child_by_field_name("left"), prod.child_by_field_name("right")


def _one_load(s: Source, factor: Node) -> tuple[Node, Node] | str:
    """(the subscript, the access as written: `__ldg(&x[e])` whole) of a factor that reads
    one element through conversions only; a reason otherwise."""
    subs = [n for n in walk(factor) if n.type == "subscript_expression"]
    if len(subs) != 1:
        return f"the factor {s.text_of(factor)!r} does not read exactly one element"
    sub = subs[0]
    for n in walk(factor):
        if n.start_byte >= sub.start_byte and n.end_byte <= sub.end_byte:
            continue
        if n.type == "identifier":
            name = n.text.decode()
            d = lookup(name, n)
            if d is not None and not (d.param and not d.pointer):
                return f"the factor {s.text_of(factor)!r} uses {name} besides its element"
    site = sub
    p = sub.parent
    if p is not None and p.type == "pointer_expression" and p.parent is not None and \
            p.parent.type == "argument_list" and p.parent.parent is not None and \
            s.text_of(p.parent.parent.child_by_field_name("function")).strip() == "__ldg":
        site = p.parent.parent
    return sub, site


def _operand(s: Source, m: FunctionModel, loop, factor: Node, coords: set[str],
             expand: dict[str, Poly], flat: str | None, digits: dict[str, Poly],
             by_param: dict[str, Param]) -> tuple[Operand, set[str]] | str:
    got = _one_load(s, factor)
    if isinstance(got, str):
        return got
    sub, site = got
    acc = m.subscript(sub, loop.node)
    if acc is None or acc[1] is None:
        return f"the offset of {s.text_of(sub)!r} is not affine"
    root = acc[0].split("@")[0]
    if root not in by_param or by_param[root].pointer is None:
        return f"{s.text_of(sub)!r} does not read a parameter's buffer"
    off = acc[1]
    if flat is not None:
        total: Poly = {}
        for c, w in digits.items():
            total = p_add(total, p_mul(p_sym(c), w))
        off = _sub(off, flat, total)
    for n, e in expand.items():
        off = _sub(off, n, e)
    qkey = loop.key
    sq = p_derivative(off, qkey)
    if not sq or poly_names(sq) & (coords | {loop.var}):
        return f"{s.text_of(sub)!r} does not move with {loop.var} by a fixed stride"
    moved = [c for c in coords if any(c in mm for mm in off)]
    for sym in {x for mm in off for x in mm}:
        base = sym.split(VAR_MARK)[0]
        if sym == qkey or base in coords:
            continue
        d = lookup(base, loop.node)
        if d is not None and not (d.param and not d.pointer):
            return f"the offset of {s.text_of(sub)!r} uses the local {base}"
    elem = element_type(by_param[root], s)
    if elem is None:
        return f"the element type of {root} is not known"
    op = Operand(root, elem, site, factor, sq, {}, {})
    return op, set(moved)


def _finish_operand(op: Operand, off: Poly, qkey: str, x: str, batch: set[str]) -> str | None:
    """Fill stride_x and base; a reason when x or a batch digit is not linear."""
    sx = p_derivative(off, x)
    if not sx or poly_names(sx) & (batch | {x, qkey.split(VAR_MARK)[0]}):
        return f"{op.root} does not move with {x} by a fixed stride"
    base: Poly = {}
    for mm, c in off.items():
        if qkey in mm or x in mm:
            continue
        base[mm] = c
    for b in batch:
        db = p_derivative(base, b)
        if db is None or poly_names(db) & (batch | {x}):
            return f"{op.root} is not linear in the batch coordinate {b}"
    op.stride_x, op.base = sx, base
    return None


@dataclass
class _Coords:
    form: str
    flat: str | None
    digits: dict[str, Poly]
    ranges: dict[str, Poly]
    expand: dict[str, Poly]
    work: list[Node]


def _coordinates(src: Source, m: FunctionModel, fn: Node, kernel: str) -> _Coords | str:
    """The output coordinates of the kernel's threads, in either form; why not."""
    body = fn.child_by_field_name("body")
    pi = per_index(src, kernel)
    if pi is not None:
        cond = pi.guard.child_by_field_name("condition").named_children[0]
        bside = cond.child_by_field_name("right") \
            if src.text_of(cond.child_by_field_name("left")).strip() == pi.var \
            else cond.child_by_field_name("left")
        bound = _product(m, bside, body)
        if bound is None:
            return "the guard's bound is not a product of sizes"
        got = _flat_coords(src, m, pi.var, bound, pi.stmts, body)
        if isinstance(got, str):
            return got
        digits, ranges, expand, _ = got
        return _Coords("flat", pi.var, digits, ranges, expand, pi.stmts)
    got2 = _two_d(src, fn)
    if isinstance(got2, str):
        return got2
    row, col, mt, nt, work = got2
    mp, np_ = _product(m, mt, body), _product(m, nt, body)
    if mp is None or np_ is None:
        return "the guard's bounds are not products of sizes"
    return _Coords("2d", None, {}, {row: mp, col: np_}, {}, work)


def dot_kernel(src: Source, kernel: str) -> DotKernel | str:
    """The kernel as a matmul-like dot kernel, or why it is not one."""
    # stays long: the checks in the order their reasons are given, each on what the one
    # before it found
    fn = find_function(src, kernel)
    if fn is None:
        return f"{kernel} is not defined in the file"
    m = FunctionModel(src, fn, expand_locals=True)
    body = fn.child_by_field_name("body")
    co = _coordinates(src, m, fn, kernel)
    if isinstance(co, str):
        return co
    form, flat, digits, ranges, expand, work = (co.form, co.flat, co.digits, co.ranges,
                                                co.expand, co.work)
    why = blocker(src, work, flat)
    if why is not None:
        return f"the per-output work {why}"
    loops = [st for st in work if st.type == "for_statement"]
    if len(loops) != 1 or any(st.type in ("while_statement", "do_statement") for st in work):
        return "not one product loop per output (a single `for` over the reduction)"
    lp_node = loops[0]
    lp = next(x for x in loops_in(body) if x.node.start_byte == lp_node.start_byte)
    if lp.children:
        return "the product loop has loops inside it (a convolution's taps?): not one " \
            "product per step"
    if not lp.canonical or lp.step is not None or lp.inclusive or \
            src.text_of(lp.start).strip() not in ("0", "0LL", "0L"):
        return "the product loop is not `for (q = 0; q < K; ++q)`"
    k_poly = m.linear(lp.end, lp.node)
    coords = set(ranges)
    if k_poly is None or poly_names(k_poly) & (coords | set(expand) | {flat or ""}):
        return "the product loop's bound depends on the output"
    pre = [st for st in work if st.start_byte < lp_node.start_byte]
    post = [st for st in work if st.start_byte > lp_node.start_byte]
    if any(st.type != "declaration" for st in pre):
        return "statements before the product loop that are not declarations"
    accs = {}
    for st in pre:
        for name, init, ptr, arr in declarators(st):
            if not ptr and not arr:
                accs[name] = (st, init)
    got3 = _update_parts(src, lp.body, set(accs))
    if got3 is None:
        return "the product loop's body is not `acc += L * R;`"
    acc, left, right = got3
    acc_decl, acc_init = accs[acc]
    if len(list(declarators(acc_decl))) != 1:
        return f"{acc} is declared with other names"
    acc_type = src.text_of(acc_decl.child_by_field_name("type")).strip()
    if acc_type not in ("float", "double"):
        return f"the accumulator {acc} is {acc_type}, not float or double"
    for st in pre:
        for n in walk(st):
            if n.type == "identifier" and n.text.decode() == acc and st is not acc_decl:
                return f"{acc} is used before the loop"
    by_param = {p.name: p for p in params(fn)}
    ops = []
    for f in (left, right):
        got4 = _operand(src, m, lp, f, coords, expand, flat, digits, by_param)
        if isinstance(got4, str):
            return got4
        ops.append(got4)
    (oa, ma), (ob, mb) = ops
    rows, cols = ma - mb, mb - ma
    if len(rows) != 1 or len(cols) != 1:
        return "the operands do not each move with an output coordinate of their own " \
            "(no reuse across rows and columns to tile)"
    # A is the operand that moves with the row: the roles follow the operands
    row2, col2 = next(iter(rows)), next(iter(cols))
    batch = sorted(coords - {row2, col2}, key=lambda c: sum(len(x) for x in digits.get(c, {})))
    for op, x in ((oa, row2), (ob, col2)):
        off = _full_offset(src, m, lp, op, flat, digits, expand)
        why = _finish_operand(op, off, lp.key, x, set(batch))
        if why is not None:
            return why
    for arr in (oa.root, ob.root):
        if _written(src, fn, arr):
            return f"the kernel writes {arr}, which the product reads"
    return DotKernel(fn=fn, name=kernel, form=form, flat=flat, digits=digits, ranges=ranges,
                     row=row2, col=col2, batch=batch,
                     pre=[st for st in pre if st is not acc_decl], acc=acc, acc_type=acc_type,
                     acc_init=None if acc_init is None or _ZERO.match(src.text_of(acc_init))
                     else src.text_of(acc_init), loop=lp_node, qvar=lp.var,
                     k_bound=src.text_of(lp.end), update=lp.body, a=oa, b=ob, post=post,
                     params=params(fn))


def _full_offset(src: Source, m: FunctionModel, lp, op: Operand, flat: str | None,
                 digits: dict[str, Poly], expand: dict[str, Poly]) -> Poly:
    sub = op.load if op.load.type == "subscript_expression" else \
        next(n for n in walk(op.load) if n.type == "subscript_expression")
    off = m.subscript(sub, lp.node)[1]
    if flat is not None:
        total: Poly = {}
        for c, w in digits.items():
            total = p_add(total, p_mul(p_sym(c), w))
        off = _sub(off, flat, total)
    for n, e in expand.items():
        off = _sub(off, n, e)
    return off


def _written(src: Source, fn: Node, param: str) -> bool:
    m = FunctionModel(src, fn)
    for n in walk(fn):
        t = n.child_by_field_name("left") if n.type == "assignment_expression" else \
            n.child_by_field_name("argument") if n.type == "update_expression" else None
        if t is None or t.type not in ("subscript_expression", "pointer_expression"):
            continue
        acc = m.access(t, m.body)
        if acc is None or acc[0].split("@")[0] == param:
            return True
    return False


def why_not_dot(src: Source, kernel: str) -> str | None:
    got = dot_kernel(src, kernel)
    return got if isinstance(got, str) else None


# ---------------------------------------------------------------- writing the tiled kernel

def operand_load(src: Source, dk: DotKernel, op: Operand, x: str, q: str,
                 batch: dict[str, str]) -> str:
    """The access of `op` at row-or-column `x` and reduction index `q` (C expressions),
    the batch digits named by `batch`: `a[(long long)(...) * (k) + ...]`, or through
    `__ldg` where the kernel read it so."""
    off = p_add(p_add(op.base, p_mul(op.stride_x, p_sym("kc_X"))), p_mul(op.stride_q,
                                                                          p_sym("kc_Q")))
    text = poly_c(off, {"kc_X": x, "kc_Q": q, **batch})
    access = f"{op.root}[{text}]"
    return f"__ldg(&{access})" if op.load.type == "call_expression" else access


def factor_with(src: Source, op: Operand, value: str) -> str:
    """The factor as written with its access replaced by `value` (conversions kept)."""
    f, ld = op.factor, op.load
    text = src.text_of(f)
    a, b = ld.start_byte - f.start_byte, ld.end_byte - f.start_byte
    return text[:a] + value + text[b:]


def update_with(src: Source, dk: DotKernel, acc: str, a_val: str, b_val: str) -> str:
    """The loop's statement for one output: the accumulator and both accesses replaced."""
    st = dk.update
    if st.type == "compound_statement":
        st = next(c for c in st.named_children if c.type != "comment")
    text = src.text_of(st)
    edits = []
    for op, val in ((dk.a, a_val), (dk.b, b_val)):
        edits.append((op.load.start_byte - st.start_byte, op.load.end_byte - st.start_byte,
                      val))
    for n in walk(st):
        if n.type == "identifier" and n.text.decode() == dk.acc and \
                not any(a <= n.start_byte - st.start_byte < b for a, b, _ in edits):
            edits.append((n.start_byte - st.start_byte, n.end_byte - st.start_byte, acc))
    for a, b, t in sorted(edits, reverse=True):
        text = text[:a] + t + text[b:]
    return text.strip()


def per_output(src: Source, dk: DotKernel, row: str, col: str, batch: dict[str, str],
               value: str, pad: str) -> str:
    """The statements that finish one output at (batch, row, col) with the sum `value`:
    the kernel's own declarations and epilogue, its coordinates rebound, under the guard
    on row and column."""
    lines = []
    if dk.form == "flat":
        coords = {dk.row: row, dk.col: col, **batch}
        total = " + ".join(f"({INDEX})({coords[c]})" + ("" if w == {(): 1} else
                                                           f" * ({poly_c(w)})")
                           for c, w in dk.digits.items())
        lines.append(f"{INDEX} {dk.flat} = {total};")
    else:
        lines.append(f"{INDEX} {dk.row} = {row};")
        lines.append(f"{INDEX} {dk.col} = {col};")
    for st in dk.pre:
        lines.append(dedent(src, st))
    init = f"({dk.acc_init}) + " if dk.acc_init else ""
    lines.append(f"{dk.acc_type} {dk.acc} = {init}{value};")
    for st in dk.post:
        lines.append(dedent(src, st))
    inner = "\n".join(lines)
    guard = f"if ({row} < {dk.range_text(dk.row)} && {col} < {dk.range_text(dk.col)}) {{"
    return pad + guard + "\n" + "\n".join(pad + "    " + ln if ln.strip() else ""
                                          for ln in inner.split("\n")) + "\n" + pad + "}"


def dedent(src: Source, st: Node) -> str:
    text = src.indent_of(st) + src.text_of(st)
    base = src.indent_of(st)
    return "\n".join(ln[len(base):] if ln.startswith(base) else ln.lstrip()
                     for ln in text.split("\n"))


def batch_decode(dk: DotKernel, var: str, pad: str) -> tuple[list[str], dict[str, str]]:
    """Lines that take the batch digits out of `var` (lowest first) and their names."""
    lines, names = [], {}
    for k, b in enumerate(dk.batch):
        name = f"kc_b{k}"
        names[b] = name
        if k + 1 < len(dk.batch):
            lines.append(f"{pad}const {INDEX} {name} = {var} % ({dk.range_text(b)}); "
                         f"{var} /= ({dk.range_text(b)});")
        else:
            lines.append(f"{pad}const {INDEX} {name} = {var};")
    return lines, names


def launch_range(dk: DotKernel, coord: str, names: dict[str, str]) -> str | None:
    """A coordinate's range in the launch's terms (kernel parameter -> argument); None
    when it uses anything but size arguments and integers."""
    p = dk.ranges[coord]
    out = []
    for mm, c in sorted(p.items()):
        syms = []
        for s_ in mm:
            if s_ not in names:
                return None
            syms.append(names[s_])
        out.append("*".join(([str(c)] if c != 1 or not syms else []) + syms))
    return " + ".join(out) if out else None


def _contiguous_first(dk: DotKernel, which: str) -> bool:
    """Whether the operand's slice is read with q fastest (it is contiguous along q), or
    with its row/column fastest."""
    op = dk.a if which == "A" else dk.b
    return op.stride_q == {(): 1} or op.stride_x != {(): 1}


def stage_loop(src: Source, dk: DotKernel, which: str, batch: dict[str, str], pad: str,
               size: str, depth: str, slot: str) -> str:
    """The loop by which a block's threads (`kc_tid` of `kc_nthreads`) copy the `size` x
    `depth` slice of operand `which` ("A": rows from kc_row0, "B": columns from kc_col0;
    the reduction from kc_k0) into shared memory at `slot` (an expression of kc_x, kc_q),
    consecutive threads on consecutive addresses of the operand, zero outside it."""
    op, x0, extent = (dk.a, "kc_row0", dk.range_text(dk.row)) if which == "A" else \
        (dk.b, "kc_col0", dk.range_text(dk.col))
    if _contiguous_first(dk, which):
        split = f"const int kc_x = kc_e / {depth}, kc_q = kc_e % {depth};"
    else:
        split = f"const int kc_q = kc_e / {size}, kc_x = kc_e % {size};"
    load = operand_load(src, dk, op, "kc_gx", "kc_gq", batch)
    return (f"{pad}for (int kc_e = kc_tid; kc_e < {size} * {depth}; kc_e += kc_nthreads) {{\n"
            f"{pad}    {split}\n"
            f"{pad}    const {INDEX} kc_gx = {x0} + kc_x, kc_gq = kc_k0 + kc_q;\n"
            f"{pad}    if (kc_gx < ({extent}) && kc_gq < ({dk.k_bound})) {slot} = {load};\n"
            f"{pad}    else {slot} = ({op.elem})0.0f;\n"
            f"{pad}}}")


def uses_thread_words(src: Source, nodes: list[Node]) -> bool:
    return any(n.type == "identifier" and n.text.decode() in THREAD_WORDS
               for st in nodes for n in walk(st))
