"""Loop-nest restructuring: `interchange` (i-j-k -> i-k-j for matmul-like nests and sums
down columns), `tile` (cache blocking of strided 2-deep nests, a transpose) and
`loop_order` (`swap_loops`: a perfectly nested pair exchanged so the inner loop walks
memory contiguously).

interchange is legal on a nest `for j { acc = 0; for k acc += X * Y; C[..j..] = acc; }`
(or `acc = C[..j..]`, the element's own value, with statements before it that update the
element alone, `C[i][j] *= beta;`, which become a loop over j of their own first)
whose k loop's bounds do not depend on j, whose product does not read C, and whose j
iterations are independent (`check_loop`: each writes its own element of C). Each element
of C still sums its k terms in the original order. Offered only where Y's inner access
is strided in k and unit-stride in j; rows shorter than MIN_INNER keep the original order
(a small-size path). Refused under any pragma but simd/unroll hints.

tile is legal on a perfectly nested 2-deep nest whose iterations are all independent
(`check_loop` on both loops) and whose inner loop accesses an array with a large stride:
tiles only reorder independent iterations.

loop_order is legal on a perfectly nested pair where every iteration is independent of
every other and the inner bounds do not depend on the outer variable; offered where the
inner loop is the strided one and the outer the contiguous one.
"""

from __future__ import annotations

import re
from typing import Any

from kernelcrew.agents.transforms.analysis.common import (
    MIN_INNER,
    SMALL_MARK,
    assignment,
    finish,
    fresh_name,
    guard_edit,
    in_small_path,
    invariant_text,
    loop_header,
    mentions_var,
    product,
    repeat,
    statements,
    strip_hints,
)
from kernelcrew.agents.transforms.analysis.dependence import check_loop
from kernelcrew.agents.transforms.kernel_files import Outcome, each_entry
from kernelcrew.csource.affine import FunctionModel, split_terms
from kernelcrew.csource.syntax import (
    Edit,
    Loop,
    Node,
    Source,
    declarators,
    pragma_text,
    pragmas_before,
    remove_lines,
    same,
    walk,
)
from kernelcrew.kernels.kernelfile import KernelFile

# ---------------------------------------------------------------- interchange (matmul)


def interchange(src: str, entry: str) -> str | None:
    """i-j-k matmul nests (`acc = 0; for k: acc += A[..k] * B[k*n + j]; C[..j] = acc`)
    become i-k-j: C's row is zeroed, A's element is hoisted into a scalar and the inner
    loop streams rows of B and C with unit stride. Only where B's inner access is strided
    and the rewrite is legal."""
    return repeat(src, entry, lambda s, m: next(
        (out for j in m.loops if (out := _interchange_one(s, m, j)) is not None), None))


def _matmul_nest(s: Source, m: FunctionModel, j: Loop
                 ) -> tuple[Loop, str, Node, Node | None, Node, bool, Node] | None:
    """The nest `for j { acc = 0; for k acc += X * Y; C[..j..] = acc; }` where the
    interchange is legal and pays: (the k loop, acc's type, its zero, the factor free of j
    or None for a sum down columns, the factor that walks j, whether X came first, C's
    element). None otherwise."""
    # stays long: the nest's shape is matched top to bottom, each check on what the one
    # before it found
    if in_small_path(j.node):
        return None
    if not j.canonical or len(j.children) != 1 or j.body.type != "compound_statement":
        return None
    if any(not re.match(r"omp\s+simd\b|GCC\s+unroll|unroll", pragma_text(s, p))
           for p in pragmas_before(j.node)):
        return None
    q = j.children[0]
    if not q.canonical or q.children:
        return None
    stmts = statements(j.body)
    pre = [st for st in stmts if st.start_byte < q.node.start_byte and st.type != "preproc_call"]
    post = [st for st in stmts if st.start_byte > q.node.end_byte]
    # before the accumulator, statements that update the element alone (`C[i][j] *=
    # beta;`): they run as a loop of their own over j, before the products
    if not pre or len(post) != 1 or pre[-1].type != "declaration":
        return None
    lead, pre = pre[:-1], pre[-1:]

    ds = list(declarators(pre[0]))
    if len(ds) != 1 or ds[0][2] or ds[0][1] is None:
        return None
    acc, zero = ds[0][0], ds[0][1]
    acc_type = s.text_of(pre[0].child_by_field_name("type"))
    # the k loop: exactly `acc += X * Y;`
    qs = statements(q.body)
    upd = assignment(qs[0], "+=") if len(qs) == 1 else None
    if upd is None and len(qs) == 1 and (plain := assignment(qs[0], "=")) is not None:
        # `acc = acc + X * Y;`, the same update
        r = plain[1]
        if r.type == "binary_expression" and r.child_by_field_name("operator").type == "+" \
                and s.text_of(r.child_by_field_name("left")).strip() == acc:
            upd = (plain[0], r.child_by_field_name("right"))
    if upd is None or s.text_of(upd[0]).strip() != acc:
        return None
    prod = upd[1]
    xy = product(prod)
    if xy is None or not any(mentions_var(m, n, j) for n in xy):
        # a sum down the columns: `acc += B[k*n + j]`, no factor to hoist
        x, y, x_first = None, prod, True
    else:
        x, y = xy
        if mentions_var(m, x, j) and not mentions_var(m, y, j):
            x, y, x_first = y, x, False
        else:
            x_first = True
    if x is not None and mentions_var(m, x, j) or not mentions_var(m, y, j):
        return None
    if x is None and (y.type != "subscript_expression" or any(
            n.type == "call_expression" for n in walk(y))):
        return None
    if any(n.type == "identifier" and n.text.decode() == acc for n in walk(prod)):
        return None
    # the store: C[idx] = acc, idx free of the k variable
    store = assignment(post[0], "=")
    if store is None or s.text_of(store[1]).strip() != acc:
        return None
    target = store[0]
    if target.type != "subscript_expression" or mentions_var(m, target, q):
        return None
    # the sum starts at 0, or at the element itself (`acc = C[i][j]`: C keeps its value)
    elem = "".join(s.text_of(target).split())
    keeps = "".join(s.text_of(zero).split()) == elem
    if not keeps and (zero.type != "number_literal" or
                      float(zero.text.decode().rstrip("fFlL") or 1) != 0.0):
        return None
    for st in lead:
        upd_lead = st.named_children[0] if st.type == "expression_statement" and \
            st.named_children else None
        if upd_lead is None or upd_lead.type != "assignment_expression" or \
                "".join(s.text_of(upd_lead.child_by_field_name("left")).split()) != elem or \
                any(n.type in ("call_expression", "assignment_expression", "update_expression")
                    or (n.type == "identifier" and n.text.decode() == acc)
                    for n in walk(upd_lead.child_by_field_name("right"))):
            return None
    # rectangular: the k loop's bounds do not depend on j
    if any(mentions_var(m, n, j) for n in (q.start, q.end) if n is not None):
        return None
    # C is not read by the product, and each j writes its own element
    c_root = m.subscript(target, j.node)
    for n in walk(prod):
        if n.type == "subscript_expression":
            r = m.subscript(n, j.node)
            if r is None or c_root is None or r[0] == c_root[0]:
                return None
    if not check_loop(m, j, allow_reductions=False).ok:
        return None
    if not _strided_in_k(m, j, q, y):
        return None
    return q, acc_type, None if keeps else zero, x, y, x_first, target, lead


def _strided_in_k(m: FunctionModel, j: Loop, q: Loop, y: Node) -> bool:
    """The interchange pays only where Y's access is strided in k (a new line per step)
    and unit-stride in j (contiguous once j is innermost)."""
    y_acc = next((m.subscript(n, q.node) for n in walk(y) if n.type == "subscript_expression"),
                 None)
    if y_acc is None or y_acc[1] is None:
        return False
    split = split_terms(y_acc[1])
    if split is None:
        return False
    terms = split[0]
    kq = terms.get(q.key)
    if kq is None or kq == {(): 1}:
        return False
    y_j = m.subscript(next(n for n in walk(y) if n.type == "subscript_expression"), j.node)
    split_j = split_terms(y_j[1]) if y_j is not None and y_j[1] is not None else None
    return split_j is not None and split_j[0].get(j.key) == {(): 1}


def _interchange_one(s: Source, m: FunctionModel, j: Loop) -> str | None:
    nest = _matmul_nest(s, m, j)
    if nest is None:
        return None
    q, acc_type, zero, x, y, x_first, target, lead = nest
    simd = any(re.match(r"omp\s+simd", pragma_text(s, p)) for p in pragmas_before(q.node))
    ind = s.indent_of(j.node)
    step = "    "
    a = fresh_name(m, "a_" + (q.var or "k"))
    c_text = s.text_of(target)
    y_text = s.text_of(y)
    prod_text = y_text if x is None else f"{a} * {y_text}" if x_first else f"{y_text} * {a}"
    n_text = invariant_text(s, m, j.end, j.node)
    if n_text is None:
        return None
    simd_line = "#pragma omp simd\n" if simd else ""
    ii = ind + step  # the interchanged nest sits one level deeper, inside the version test
    first = [s.text_of(st).strip() for st in lead]
    if zero is not None:
        first.append(f"{c_text} = {zero.text.decode()};")
    fast = (
        (f"{ii}{loop_header(s, j)} {{\n"
         + "".join(f"{ii}{step}{st}\n" for st in first) +
         f"{ii}}}\n" if first else "") +
        f"{ii}{loop_header(s, q)} {{\n"
        + (f"{ii}{step}const {acc_type} {a} = {s.text_of(x)};\n" if x is not None else "") +
        f"{simd_line}"
        f"{ii}{step}{loop_header(s, j)} {{\n"
        f"{ii}{step}{step}{c_text} += {prod_text};\n"
        f"{ii}{step}}}\n"
        f"{ii}}}"
    )
    # short rows: the original order (one dot product per element) is cheaper than
    # setting up a vector loop per (i, k) pair
    original = strip_hints(s.data[s.line_start(j.node):j.node.end_byte].decode())
    original = "\n".join(step + ln if ln.strip() and not ln.startswith("#") else ln
                          for ln in original.split("\n"))
    n_cond = n_text if re.fullmatch(r"[\w.]+", n_text) else f"({n_text})"
    new = (f"{ind}if ({n_cond} >= {MIN_INNER}) {{\n{fast}\n{ind}}} else {{\n"
           f"{ii}{SMALL_MARK}\n{original}\n{ind}}}")
    edits = remove_lines(s, pragmas_before(j.node))
    edits.append(Edit(s.line_start(j.node), j.node.end_byte, new))
    return finish(s, edits)


# ---------------------------------------------------------------- tiling (transpose)

def tile(src: str, entry: str, *, knob: str = "TILE", default: int = 32,
         inner: str = "write") -> str | None:
    """Cache-block a perfectly nested, fully independent 2-deep loop nest that accesses one
    array with a large stride in the inner loop (a transpose): TILE x TILE tiles keep the
    strided side's lines in L1. `inner="write"` (default) makes the loop over which the
    written array is contiguous the innermost one inside a tile (stores cost more than loads:
    a write-allocate per line); "keep" keeps the original order."""
    def once(s: Source, m: FunctionModel) -> str | None:
        for outer in m.loops:
            if len(outer.children) != 1 or in_small_path(outer.node):
                continue
            inner_lp = outer.children[0]
            if inner_lp.children or len(statements(outer.body)) != 1 or \
                    not same(statements(outer.body)[0], inner_lp.node):
                continue
            out = _tile_one(s, m, outer, inner_lp, knob, default, inner)
            if out is not None:
                return out
        return None

    return repeat(src, entry, once)


def _strided(m: FunctionModel, lp_in: Loop, lp_out: Loop) -> tuple[bool, bool]:
    """(some access is strided along the inner loop, the written array is contiguous
    along the outer loop)."""
    strided = write_outer = False
    for n in walk(lp_in.body):
        if n.type != "subscript_expression":
            continue
        acc = m.subscript(n, lp_out.node)
        if acc is None or acc[1] is None or (sp := split_terms(acc[1])) is None:
            continue
        ci, co = sp[0].get(lp_in.key), sp[0].get(lp_out.key)
        if ci is not None and ci != {(): 1} and co == {(): 1}:
            strided = True
            p = n.parent
            if p.type == "assignment_expression" and p.child_by_field_name("left") == n:
                write_outer = True
    return strided, write_outer


def _tile_one(s: Source, m: FunctionModel, a: Loop, b: Loop, knob: str, default: int,
              inner: str) -> str | None:
    for lp in (a, b):
        if not lp.canonical or lp.step is not None or s.text_of(lp.start).strip() != "0" or \
                lp.inclusive:
            return None
    if mentions_var(m, b.end, a) or any(not re.match(r"omp\s+(parallel\s+)?for\b|omp\s+simd",
                                                      pragma_text(s, p))
                                         for p in pragmas_before(a.node) +
                                         pragmas_before(b.node)):
        return None
    strided, write_outer = _strided(m, b, a)
    if not strided:
        return None
    # every (i, j) iteration independent of every other: reorder freely
    if not check_loop(m, a, allow_reductions=False).ok or \
            not check_loop(m, b, allow_reductions=False).ok:
        return None
    decl_type = s.text_of(a.decl.child_by_field_name("type")) if a.decl is not None and \
        a.decl.type == "declaration" else "long long"
    btype = s.text_of(b.decl.child_by_field_name("type")) if b.decl is not None and \
        b.decl.type == "declaration" else decl_type
    ia, ib = a.var, b.var
    a0, a1 = fresh_name(m, f"{ia}0"), fresh_name(m, f"{ia}1")
    b0, b1 = fresh_name(m, f"{ib}0"), fresh_name(m, f"{ib}1")
    ea, eb = s.text_of(a.end).strip(), s.text_of(b.end).strip()
    ind = s.indent_of(a.node)
    st = "    "
    body = s.text_of(b.body)
    body_lines = body.split("\n")
    body = "\n".join([body_lines[0]] + [f"{st}{st}{ln}" if ln.strip() else ln
                                        for ln in body_lines[1:]])
    a_prag = [pragma_text(s, p) for p in pragmas_before(a.node)]
    b_prag = [pragma_text(s, p) for p in pragmas_before(b.node)]
    loops_in = [(ia, decl_type, a0, a1, [p for p in a_prag if "simd" in p]),
                (ib, btype, b0, b1, b_prag)]
    if inner == "write" and write_outer:
        loops_in.reverse()
    outer_prag = [p for p in a_prag if "simd" not in p]
    lines = [f"#pragma {p}" for p in outer_prag]
    # the two tile loops are perfectly nested (tile ends computed inside), so a threaded
    # version can collapse them and balance thin shapes
    lines.append(f"{ind}for ({decl_type} {a0} = 0; {a0} < {ea}; {a0} += {knob}) {{")
    lines.append(f"{ind}{st}for ({btype} {b0} = 0; {b0} < {eb}; {b0} += {knob}) {{")
    lines.append(f"{ind}{st}{st}const {decl_type} {a1} = {a0} + {knob} < {ea} ? {a0} + {knob} "
                 f": {ea};")
    lines.append(f"{ind}{st}{st}const {btype} {b1} = {b0} + {knob} < {eb} ? {b0} + {knob} : "
                 f"{eb};")
    (v1, t1, s1, e1, p1), (v2, t2, s2, e2, p2) = loops_in
    lines += [f"#pragma {p}" for p in p1]
    lines.append(f"{ind}{st}{st}for ({t1} {v1} = {s1}; {v1} < {e1}; ++{v1}) {{")
    lines += [f"#pragma {p}" for p in p2]
    lines.append(f"{ind}{st}{st}{st}for ({t2} {v2} = {s2}; {v2} < {e2}; ++{v2}) {body}")
    lines.append(f"{ind}{st}{st}}}")
    lines.append(f"{ind}{st}}}")
    lines.append(f"{ind}}}")
    new = "\n".join(lines)
    edits = remove_lines(s, pragmas_before(a.node))
    start = s.line_start(a.node)
    edits.append(Edit(start, a.node.end_byte, new))
    if f"#define {knob}" not in s.text:
        edits.append(guard_edit(s, m, knob, default))
    return finish(s, edits)


# ---------------------------------------------------------------- loop order

def _unit_votes(m: FunctionModel, a: Loop, b: Loop) -> tuple[int, int]:
    """(accesses in b's body with unit stride in a and another stride in b, the reverse):
    which order of the pair walks memory contiguously in the inner loop."""
    to_swap = keep = 0
    for n in walk(b.body):
        if n.type != "subscript_expression":
            continue
        acc = m.subscript(n, a.node)
        if acc is None or acc[1] is None or (sp := split_terms(acc[1])) is None:
            continue
        ca, cb = sp[0].get(a.key), sp[0].get(b.key)
        if ca == {(): 1} and cb is not None and cb != {(): 1}:
            to_swap += 1
        elif cb == {(): 1} and ca is not None and ca != {(): 1}:
            keep += 1
    return to_swap, keep


def _swap_one(s: Source, m: FunctionModel, a: Loop) -> str | None:
    if in_small_path(a.node) or len(a.children) != 1 or pragmas_before(a.node):
        return None
    b = a.children[0]
    stmts = statements(a.body)
    if len(stmts) != 1 or not same(stmts[0], b.node) or pragmas_before(b.node):
        return None
    if not a.canonical or not b.canonical:
        return None
    # rectangular: b's bounds and step do not depend on a; a's are fixed inside b
    if any(n is not None and mentions_var(m, n, a) for n in (b.start, b.end, b.step)):
        return None
    to_swap, keep = _unit_votes(m, a, b)
    if to_swap <= keep:
        return None
    # every (a, b) iteration independent of every other: any order gives the same result
    if not check_loop(m, a, allow_reductions=False).ok or \
            not check_loop(m, b, allow_reductions=False).ok:
        return None
    ha, hb = loop_header(s, a), loop_header(s, b)
    body = s.data[b.body.start_byte:b.node.end_byte].decode()
    ind = s.indent_of(a.node)
    text = s.data[s.line_start(a.node):a.node.end_byte].decode()
    # swap the two headers, keep everything else (the bodies' text and layout)
    at_a = text.index(ha)
    at_b = text.index(hb, at_a + len(ha))
    new = text[:at_a] + hb + text[at_a + len(ha):at_b] + ha + text[at_b + len(hb):]
    if body not in new:
        return None
    return finish(s, [Edit(s.line_start(a.node), a.node.end_byte, new)]) if ind is not None \
        else None


def swap_loops(src: str, entry: str) -> str | None:
    """Exchange a perfectly nested pair of loops when the inner one walks memory with a
    stride and the outer one contiguously (column-order code: `for j: for i: v[i*nx + j]`),
    where every iteration of the pair is independent of every other and the inner bounds
    do not depend on the outer variable; the loop bodies are kept as they are."""
    return repeat(src, entry, lambda s, m: next(
        (out for a in m.loops if (out := _swap_one(s, m, a)) is not None), None))


# ---------------------------------------------------------------- on a kernel file

def tile_in_file(kf: KernelFile, p: dict[str, Any]) -> Outcome | None:
    """The tile move on a kernel file: its knob (`knob`, a name) set to the value the front
    matter has, else `default`."""
    knob = str(p["knob"])
    value = kf.meta.knobs.get(knob, int(p["default"]))
    out = each_entry(kf, lambda s, e: tile(s, e, knob=knob, default=int(value),
                                            inner=str(p["inner"])))
    if out is not None:
        out.knobs = {knob: value}
    return out
