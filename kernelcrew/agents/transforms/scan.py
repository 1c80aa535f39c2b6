"""Blocked two-pass parallel scan for prefix sums.

`for (j = a; j < b; ++j) { acc += x[j]; y[j] = acc; }` carries `acc` from one element to
the next, so it cannot be threaded as it is; but the sum is associative. Split the range
into SCAN_BLOCKS blocks: pass 1, each thread scans its blocks from zero (block 0 from the
running sum's value before the loop) and keeps each block's total; one thread turns the
totals into each block's offset (and sets `acc` to the final total); pass 2, each thread
adds its blocks' offsets to what they stored. Two passes over the output instead of one,
so it pays only for long scans: the threaded version runs from SCAN_MIN elements, the loop
as written below.

Where the scan is the inner loop of an independent loop over rows, many rows are better
threaded whole (one pass): the move threads the rows when there are at least SCAN_ROWS of
them (and OMP_MIN_WORK elements in all), and scans the blocks of each row in parallel when
there are fewer (one long scan, a few long rows).

Legal when the running sum is only updated by `acc += v` / `acc -= v` / `acc = acc + v`
(v free of acc), read only by top-level stores `Y[idx] = acc;` (the inclusive and the
exclusive scan alike), and the loop is otherwise independent (every other write one
element per iteration, no other carried scalar). A float sum is reassociated: the results
change in the last bits, which the verifier checks against the op's tolerance.
"""

from __future__ import annotations

import re

from kernelcrew.agents.transforms.affine import FunctionModel
from kernelcrew.agents.transforms.common import (
    collapsed,
    finish,
    fresh_name,
    guard_edit,
    in_marked_block,
    in_small_path,
    innermost_reasons,
    invariant_text,
    model_of,
    statements,
)
from kernelcrew.agents.transforms.cst import (
    Edit,
    Loop,
    Node,
    Source,
    lookup,
    pragma_text,
    pragmas_before,
    walk,
    within,
)
from kernelcrew.agents.transforms.dependence import check_loop
from kernelcrew.agents.transforms.jam import rename_copy
from kernelcrew.agents.transforms.privatize import in_omp_construct
from kernelcrew.agents.transforms.threads import _work_expr, parallel_verdict

MARK = "// kernelcrew: blocked scan"
VECTOR_MARK = "// kernelcrew: vector scan"  # vscan's blocks: their leftover loops stay
DEFAULTS = {"SCAN_MIN": 1 << 15, "SCAN_BLOCKS": 64, "SCAN_ROWS": 16, "OMP_MIN_WORK": 1 << 20}
_ARITH = re.compile(r"(float|double|int|long|long long|unsigned|unsigned int|unsigned long|"
                    r"short|u?int(8|16|32|64)_t|size_t)")


def _span(start: str, end: str) -> str:
    """The trip count `end - start` in 64 bits."""
    if start.strip() == "0":
        return f"(long long)({end})"
    return f"(long long)({end}) - (long long)({start})"


def _uses(node: Node, key: str) -> list[Node]:
    out = []
    for n in walk(node):
        if n.type == "identifier":
            d = lookup(n.text.decode(), n)
            if d is not None and d.key == key:
                out.append(n)
    return out


def scan_plan(m: FunctionModel, lp: Loop,
              threads_ok: bool = False) -> tuple[str, str, list[Node]] | str:
    """(the running sum's name, its type, the store statements) of a scan loop, or why
    `lp` is not one. `threads_ok`: the loop may sit inside an OpenMP construct (a thread's
    own rows), for a move that keeps it on one thread."""
    s = m.src
    line = s.line_of(lp.node)
    if lp.children or not lp.canonical or lp.step is not None or lp.inclusive:
        return f"loop at line {line} is not an innermost unit-step loop"
    if not threads_ok and (any(re.match(r"omp\b(?!\s+simd\b)", pragma_text(s, p))
                               for p in pragmas_before(lp.node))
                           or in_omp_construct(s, lp.node)):
        return f"loop at line {line} is inside an OpenMP construct"
    body = statements(lp.body)
    updates, stores, acc = [], [], None
    for st in body:
        if st.type != "expression_statement" or not st.named_children:
            continue
        e = st.named_children[0]
        if e.type != "assignment_expression":
            continue
        left, right = e.child_by_field_name("left"), e.child_by_field_name("right")
        op = e.child_by_field_name("operator").type
        if left.type == "identifier":
            d = lookup(left.text.decode(), left)
            if d is None or within(d.node, lp.node):
                continue
            value = right if op in ("+=", "-=") else None
            if op == "=" and right.type == "binary_expression" and \
                    right.child_by_field_name("operator").type == "+" and \
                    right.child_by_field_name("left").type == "identifier" and \
                    right.child_by_field_name("left").text.decode() == d.name:
                value = right.child_by_field_name("right")
            if value is None or _uses(value, d.key):
                return f"{s.text_of(e)!r} at line {s.line_of(e)} is not a running sum"
            if acc is not None and acc.key != d.key:
                return f"loop at line {line} carries two scalars ({acc.name}, {d.name})"
            acc = d
            updates.append(st)
    if acc is None:
        return f"loop at line {line} carries no running sum"
    if acc.pointer or acc.array or acc.param:
        return f"{acc.name} is not a plain local"
    ty = acc.node.child_by_field_name("type")
    tname = s.text_of(ty).strip() if ty is not None else ""
    if not _ARITH.fullmatch(tname):
        return f"{acc.name} is not of an arithmetic type"
    for st in body:
        if st in updates:
            continue
        uses = _uses(st, acc.key)
        if not uses:
            continue
        e = st.named_children[0] if st.type == "expression_statement" and \
            st.named_children else None
        if e is None or e.type != "assignment_expression" or \
                e.child_by_field_name("operator").type != "=" or \
                e.child_by_field_name("left").type != "subscript_expression" or \
                s.text_of(e.child_by_field_name("right")).strip() != acc.name:
            return (f"{acc.name} is read at line {s.line_of(uses[0])} other than by a store "
                    f"`y[i] = {acc.name};`")
        target = e.child_by_field_name("left")
        for n in walk(target):
            if n.type == "identifier":
                d = lookup(n.text.decode(), n)
                if d is not None and within(d.node, lp.body):
                    return f"the store at line {s.line_of(st)} is indexed by a local"
        stores.append(st)
    for n in walk(lp.body):  # updates and stores only at the top of the body
        if n.type == "identifier" and lookup(n.text.decode(), n) is not None and \
                lookup(n.text.decode(), n).key == acc.key and \
                not any(within(n, st) for st in updates + stores):
            return f"{acc.name} is used at line {s.line_of(n)} other than in the scan"
    if not stores:
        return f"loop at line {line} stores no prefix sum"
    v = check_loop(m, lp, allow_reductions=False, exclude=frozenset([acc.key]))
    if not v.ok:
        return v.reason
    for node in (lp.start, lp.end):
        if invariant_text(s, m, node, lp.node) is None:
            return f"the bounds of the loop at line {line} change inside it"
    return acc.name, tname.replace("const", "").strip(), stores


def _blocked(s: Source, m: FunctionModel, lp: Loop, acc: str, ty: str, stores: list[Node],
             ind: str) -> str:
    """The text that replaces `lp`: the blocked two-pass scan from SCAN_MIN elements, the
    loop as written below."""
    d = lookup(acc, lp.node)
    start = invariant_text(s, m, lp.start, lp.node)
    end = invariant_text(s, m, lp.end, lp.node)
    n, tot, ln, b = (fresh_name(m, x) for x in ("kc_n", "kc_tot", "kc_len", "kc_b"))
    lo, hi, j, run, t, off = (fresh_name(m, x) for x in ("kc_lo", "kc_hi", "kc_j", "kc_run",
                                                        "kc_t", "kc_off"))
    mine = f"{acc}_1"
    var = j if start == "0" else f"(({start}) + {j})"
    st = "    "
    i1, i2, i3, i4, i5 = (ind + st * k for k in range(1, 6))
    body = [rename_copy(m, x, lp, 1, var, {d.key}) for x in statements(lp.body)]
    adds = []
    for x in stores:
        e = x.named_children[0]
        target = rename_copy(m, e.child_by_field_name("left"), lp, 1, var, set())
        adds.append(f"{i5}{target} += {off};\n")
    own = lp.decl is not None and lp.decl.parent is not None and \
        lp.decl.parent.start_byte == lp.node.start_byte
    last = "" if own else f"{i2}{lp.var} = {end};\n"  # declared outside: its final value
    bounds = (f"{i4}const long long {lo} = {b} * {ln} < {n} ? {b} * {ln} : {n};\n"
              f"{i4}const long long {hi} = {lo} + {ln} < {n} ? {lo} + {ln} : {n};\n")
    original = s.data[s.line_start(lp.node):lp.node.end_byte].decode()
    original = "\n".join(st * 2 + x if x.strip() and not x.lstrip().startswith("#") else x
                         for x in original.split("\n"))
    prag = "".join(s.data[s.line_start(p):p.end_byte].decode() + "\n"
                   for p in pragmas_before(lp.node))
    return (
        f"{ind}{{  {MARK}\n"
        f"{i1}const long long {n} = {_span(start, end)};\n"
        f"{i1}if ({n} >= SCAN_MIN) {{\n"
        f"{i2}{ty} {tot}[SCAN_BLOCKS];\n"
        f"{i2}const long long {ln} = ({n} + SCAN_BLOCKS - 1) / SCAN_BLOCKS;\n"
        f"#pragma omp parallel\n"
        f"{i2}{{\n"
        f"#pragma omp for schedule(static)\n"
        f"{i3}for (long long {b} = 0; {b} < SCAN_BLOCKS; ++{b}) {{\n"
        + bounds +
        f"{i4}{ty} {mine} = {b} == 0 ? {acc} : ({ty})0;\n"
        f"{i4}for (long long {j} = {lo}; {j} < {hi}; ++{j}) {{\n"
        + "".join(f"{i5}{x}\n" for x in body) +
        f"{i4}}}\n"
        f"{i4}{tot}[{b}] = {mine};\n"
        f"{i3}}}\n"
        f"#pragma omp single\n"
        f"{i3}{{\n"
        f"{i4}{ty} {run} = {tot}[0];\n"
        f"{i4}for (long long {b} = 1; {b} < SCAN_BLOCKS; ++{b}) {{\n"
        f"{i5}const {ty} {t} = {tot}[{b}];\n"
        f"{i5}{tot}[{b}] = {run};\n"
        f"{i5}{run} += {t};\n"
        f"{i4}}}\n"
        f"{i4}{acc} = {run};\n"
        f"{i3}}}\n"
        f"#pragma omp for schedule(static)\n"
        f"{i3}for (long long {b} = 1; {b} < SCAN_BLOCKS; ++{b}) {{\n"
        f"{i4}const {ty} {off} = {tot}[{b}];\n"
        + bounds +
        f"#pragma omp simd\n"
        f"{i4}for (long long {j} = {lo}; {j} < {hi}; ++{j}) {{\n"
        + "".join(adds) +
        f"{i4}}}\n"
        f"{i3}}}\n"
        f"{i2}}}\n"
        + last +
        f"{i1}}} else {{\n"
        + prag + original + "\n"
        f"{i1}}}\n"
        f"{ind}}}")


def _last(r: Loop) -> str:
    """`lastprivate(r)` for a row counter declared outside its loop (C89): its value after
    the loop stays what the serial loop leaves."""
    own = r.decl is not None and r.decl.parent is not None and \
        r.decl.parent.start_byte == r.node.start_byte
    return "" if own else f" lastprivate({r.var})"


def _serial_arm(s: Source, node: Node) -> bool:
    """In the serial copy of a version test on the work (`if (work >= OMP_MIN_WORK) {
    threaded } else { here }`): the rows are threaded already where there are enough of
    them, so only the blocks of each row are left to thread."""
    p, child = node.parent, node
    while p is not None and p.type != "function_definition":
        if p.type == "if_statement" and "OMP_MIN_WORK" in s.text_of(
                p.child_by_field_name("condition")):
            alt = p.child_by_field_name("alternative")
            if alt is not None and within(child, alt):
                return True
        p, child = p.parent, p
    return False


def _rows_loop(s: Source, m: FunctionModel, lp: Loop) -> Loop | None:
    """The independent loop over rows directly around the scan, when threads can take its
    iterations whole."""
    r = lp.parent
    if r is None or not r.canonical or pragmas_before(r.node) or in_omp_construct(s, r.node) \
            or _serial_arm(s, r.node):
        return None
    if any(x is not None and invariant_text(s, m, x, r.node) is None
           for x in (r.start, r.end)):
        return None
    return r if parallel_verdict(m, r).ok else None


def _inside_ours(s: Source, node: Node) -> bool:
    """In code this move wrote (its threaded passes or its serial copy)."""
    p = node.parent
    while p is not None and p.type != "function_definition":
        if p.type == "compound_statement" and s.text_of(p).startswith("{  " + MARK):
            return True
        if p.type == "if_statement" and s.text_of(
                p.child_by_field_name("consequence")).startswith("{  " + MARK):
            return True
        p = p.parent
    return False


def _once(s: Source, m: FunctionModel) -> str | None:
    for lp in m.loops:
        if in_small_path(lp.node) or collapsed(s, lp):
            continue
        if _inside_ours(s, lp.node) or in_marked_block(lp.node, VECTOR_MARK):
            continue
        plan = scan_plan(m, lp)
        if isinstance(plan, str):
            continue
        acc, ty, stores = plan
        taken = {n.text.decode() for n in walk(m.fn) if n.type == "identifier"}
        if f"{acc}_1" in taken:
            continue
        r = _rows_loop(s, m, lp)
        if r is None:
            text = _blocked(s, m, lp, acc, ty, stores, s.indent_of(lp.node))
            at = pragmas_before(lp.node)
            begin = s.line_start(at[0]) if at else s.line_start(lp.node)
            edits = [Edit(begin, lp.node.end_byte, text)]
        else:
            # rows: the nest as written, threaded when there are many rows; each row's scan
            # blocked when there are few
            ind = s.indent_of(r.node)
            st = "    "
            rs = invariant_text(s, m, r.start, r.node)
            re_ = invariant_text(s, m, r.end, r.node)
            work = _work_expr(s, m, r) or f"(long long)({re_})"
            nest = s.data[s.line_start(r.node):r.node.end_byte].decode()

            def shift(text: str, k: int, st: str = st) -> str:
                return "\n".join(st * k + x if x.strip() and not x.lstrip().startswith("#")
                                 else x for x in text.split("\n"))

            inner_at = pragmas_before(lp.node)
            a = (s.line_start(inner_at[0]) if inner_at else s.line_start(lp.node)) - \
                s.line_start(r.node)
            z = lp.node.end_byte - s.line_start(r.node)
            raw = s.data[s.line_start(r.node):r.node.end_byte]
            blocked = raw[:a].decode() + _blocked(s, m, lp, acc, ty, stores,
                                                  s.indent_of(lp.node)) + raw[z:].decode()
            text = (f"{ind}if ({_span(rs, re_)} >= SCAN_ROWS) {{"
                    f"  {MARK}: rows\n"
                    f"{ind}{st}if ({work} >= OMP_MIN_WORK) {{\n"
                    f"#pragma omp parallel for schedule(static){_last(r)}\n"
                    f"{shift(nest, 2)}\n"
                    f"{ind}{st}}} else {{\n{shift(nest, 2)}\n{ind}{st}}}\n"
                    f"{ind}}} else {{\n{shift(blocked, 1)}\n{ind}}}")
            edits = [Edit(s.line_start(r.node), r.node.end_byte, text)]
        for name, value in DEFAULTS.items():
            if f"#define {name}" not in s.text and (r is not None or name not in (
                    "SCAN_ROWS", "OMP_MIN_WORK")):
                edits.append(guard_edit(s, m, name, value))
        return finish(s, edits)
    return None


def blocked_scan(src: str, entry: str) -> str | None:
    """Blocked two-pass parallel scans for the prefix-sum loops of `entry` (module doc)."""
    got = model_of(src, entry)
    if got is None:
        return None
    return _once(*got)


def scan_reasons(src: str, entry: str) -> list[str]:
    return innermost_reasons(src, entry, scan_plan)
