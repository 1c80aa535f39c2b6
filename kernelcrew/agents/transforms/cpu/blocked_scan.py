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
from typing import Any

from kernelcrew.agents.transforms.analysis.body_copies import rename_copy
from kernelcrew.agents.transforms.analysis.common import (
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
from kernelcrew.agents.transforms.analysis.openmp import in_omp_construct
from kernelcrew.agents.transforms.analysis.parallel import parallel_verdict, work_expr
from kernelcrew.agents.transforms.analysis.prefix_sums import VECTOR_MARK, scan_plan
from kernelcrew.agents.transforms.kernel_files import Outcome, each_entry
from kernelcrew.agents.transforms.reasons import per_entry
from kernelcrew.agents.transforms.views import through_views
from kernelcrew.csource.affine import FunctionModel
from kernelcrew.csource.syntax import (
    Edit,
    Loop,
    Node,
    Source,
    lookup,
    pragmas_before,
    walk,
    within,
)
from kernelcrew.kernels.kernelfile import KernelFile

MARK = "// kernelcrew: blocked scan"
DEFAULTS = {"SCAN_MIN": 1 << 15, "SCAN_BLOCKS": 64, "SCAN_ROWS": 16, "OMP_MIN_WORK": 1 << 20}


def _span(start: str, end: str) -> str:
    """The trip count `end - start` in 64 bits."""
    if start.strip() == "0":
        return f"(long long)({end})"
    return f"(long long)({end}) - (long long)({start})"


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
            work = work_expr(s, m, r) or f"(long long)({re_})"
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


# ---------------------------------------------------------------- on a kernel file

def blocked_scan_in_file(kf: KernelFile, p: dict[str, Any]) -> Outcome | None:
    """The blocked_scan move on a kernel file; the knobs its code uses go to the front
    matter."""
    # a helper called once per row is in reach too: a few long rows are its case (the
    # move never goes inside an OpenMP construct of the function it rewrites)
    out = each_entry(kf, through_views(blocked_scan))
    if out is not None:
        out.knobs = {k: kf.meta.knobs.get(k, v) for k, v in DEFAULTS.items()
                     if re.search(rf"\b{k}\b", out.body or "")}
    return out


def why_not(kf: KernelFile) -> str:
    return per_entry(kf, scan_reasons, "no prefix-sum loop (`acc += x[i]; y[i] = acc;`)",
                     as_written=True, skip=("carries no running sum", "not an innermost"))
