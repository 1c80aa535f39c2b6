"""online_softmax: a softmax's max pass and exp-sum pass as one pass (the online
softmax: the running sum rescaled whenever the running maximum grows).

Recognized in a kernel's top-level statements, one thread per row or one block per row
(after `block_reduce`; the loops then stride over the block):

    T mx = X(0);  for (j = 1; j < C; ++j) mx = fmaxf(mx, X(j));   [mx = kc_block_reduce<kc_op_max>(mx);]
    T sum = 0;    for (j = 0; j < C; ++j) { T e = expf(X(j) - mx); Y[j] = e; sum += e; }
                                                                   [sum = kc_block_reduce<kc_op_sum>(sum);]

(the max as fmaxf/fmax/max or `if (X(j) > mx) mx = X(j);`, its start -INFINITY from j = 0
too; the exponential stored or not, or stored and read back as `sum += Y[j]`). Rewritten:
the first loop goes, mx starts at -INFINITY, and the second loop keeps both statistics:
`x = X(j); if (x > mx) { sum *= expf(mx - x); mx = x; } sum += expf(x - mx);`. On one
block per row the two block reductions become one `kc_block_online_softmax(mx, sum)`
(pairs merged with warp shuffles). Where the exponentials were stored in Y, later reads
`Y[j]` (in loops over the same j) compute `expf(X(j) - mx)` again instead, and the store
goes: the row is read twice instead of three times and written once.

Legal because after the loop mx is the row's maximum and sum the sum of exp(x - mx) over
the row, as before (the rescaling is exact algebra; only the rounding of the sum changes,
within a float sum's own error). Refused when anything between the two loops uses mx,
when X(j) differs between the loops, when Y is read other than at [j] in a later loop
over the same range or written elsewhere, or when the loops' ranges differ.
"""

from __future__ import annotations

import re
from typing import Any

from kernelcrew.agents.transforms.analysis.cuda_blocks import online_helpers_edit
from kernelcrew.agents.transforms.analysis.cuda_shapes import per_index
from kernelcrew.agents.transforms.kernel_files import Outcome, entries
from kernelcrew.csource.syntax import (
    Edit,
    Node,
    Source,
    apply_edits,
    declarators,
    find_function,
    walk,
)
from kernelcrew.kernels.kernelfile import KernelFile

_EXP = {"expf", "__expf", "exp"}
_MAX = {"fmaxf", "fmax", "max"}
_NEG_INF = {"-INFINITY", "-HUGE_VALF", "-HUGE_VAL", "-FLT_MAX", "-DBL_MAX", "-(INFINITY)"}


def _n(text: str) -> str:
    return re.sub(r"\s+", "", text)


def _body_stmts(lp: Node) -> list[Node]:
    b = lp.child_by_field_name("body")
    if b.type == "compound_statement":
        return [c for c in b.named_children if c.type != "comment"]
    return [b]


def _header(s: Source, lp: Node) -> tuple[str, str, str, str] | None:
    """(var, start without `+ threadIdx.x`, condition, update) of a for loop."""
    init = lp.child_by_field_name("initializer")
    if init is None or init.type != "declaration":
        return None
    ds = list(declarators(init))
    if len(ds) != 1 or ds[0][1] is None:
        return None
    start = _n(s.text_of(ds[0][1]))
    start = re.sub(r"\+threadIdx\.x$", "", start)
    return ds[0][0], start, _n(s.text_of(lp.child_by_field_name("condition"))), \
        _n(s.text_of(lp.child_by_field_name("update")))


def _max_loop(s: Source, lp: Node) -> tuple[str, Node] | None:
    """(mx, the value node X(j)) of a running-maximum loop."""
    stmts = _body_stmts(lp)
    if len(stmts) != 1:
        return None
    st = stmts[0]
    if st.type == "expression_statement" and st.named_children and \
            st.named_children[0].type == "assignment_expression":
        e = st.named_children[0]
        left, right = e.child_by_field_name("left"), e.child_by_field_name("right")
        if left.type != "identifier" or e.child_by_field_name("operator").type != "=" or \
                right.type != "call_expression" or \
                s.text_of(right.child_by_field_name("function")).strip() not in _MAX:
            return None
        mx = left.text.decode()
        args = right.child_by_field_name("arguments").named_children
        if len(args) != 2:
            return None
        if s.text_of(args[0]).strip() == mx:
            return mx, args[1]
        if s.text_of(args[1]).strip() == mx:
            return mx, args[0]
        return None
    if st.type == "if_statement" and st.child_by_field_name("alternative") is None:
        c = st.child_by_field_name("condition").named_children[0]
        cons = st.child_by_field_name("consequence")
        if cons.type == "compound_statement":
            inner = [x for x in cons.named_children if x.type != "comment"]
            cons = inner[0] if len(inner) == 1 else None
        if cons is None or c.type != "binary_expression" or \
                c.child_by_field_name("operator").type != ">":
            return None
        mx = s.text_of(c.child_by_field_name("right")).strip()
        val = c.child_by_field_name("left")
        if _n(s.text_of(cons)) != f"{mx}={_n(s.text_of(val))};":
            return None
        return mx, val
    return None


def _exp_of(s: Source, n: Node, mx: str) -> tuple[str, str] | None:
    """(exp function, X(j) text) of `expf(X(j) - mx)`."""
    if n.type != "call_expression":
        return None
    fname = s.text_of(n.child_by_field_name("function")).strip()
    args = n.child_by_field_name("arguments").named_children
    if fname not in _EXP or len(args) != 1:
        return None
    a = args[0]
    if a.type != "binary_expression" or a.child_by_field_name("operator").type != "-" or \
            s.text_of(a.child_by_field_name("right")).strip() != mx:
        return None
    return fname, s.text_of(a.child_by_field_name("left"))


def _sum_loop(s: Source, lp: Node, mx: str) -> tuple[str, str, str, str | None] | None:
    """(sum, exp function, X(j) text, the array the exponentials are stored in) of the
    exp-sum loop."""
    stmts = _body_stmts(lp)
    local: dict[str, tuple[str, str]] = {}  # e -> (exp, X)
    stored: dict[str, tuple[str, str]] = {}  # Y[j] text -> (exp, X)
    store_root = None
    total = None
    for st in stmts:
        if st.type == "declaration":
            ds = list(declarators(st))
            if len(ds) != 1 or ds[0][1] is None:
                return None
            got = _exp_of(s, ds[0][1], mx)
            if got is None:
                return None
            local[ds[0][0]] = got
            continue
        if st.type != "expression_statement" or not st.named_children or \
                st.named_children[0].type != "assignment_expression":
            return None
        e = st.named_children[0]
        left, right = e.child_by_field_name("left"), e.child_by_field_name("right")
        op = e.child_by_field_name("operator").type
        if left.type == "subscript_expression" and op == "=":
            got = local.get(s.text_of(right).strip()) or _exp_of(s, right, mx)
            if got is None or store_root is not None:
                return None
            store_root = s.text_of(left.child_by_field_name("argument")).strip()
            stored[_n(s.text_of(left))] = got
            continue
        if left.type == "identifier" and op == "+=" and total is None:
            v = s.text_of(right).strip()
            got = local.get(v) or stored.get(_n(v)) or _exp_of(s, right, mx)
            if got is None:
                return None
            total = (left.text.decode(), *got)
            continue
        return None
    if total is None:
        return None
    sums = {x for x in list(local.values()) + list(stored.values())} | {total[1:]}
    if len(sums) != 1:
        return None
    return total[0], total[1], total[2], store_root


def _decl_of(stmts: list[Node], name: str) -> Node | None:
    for st in stmts:
        if st.type == "declaration" and any(d[0] == name for d in declarators(st)):
            return st
    return None


def _uses(node: Node, name: str) -> bool:
    return any(n.type == "identifier" and n.text.decode() == name for n in walk(node))


def _reduce_call(s: Source, st: Node | None, name: str, op: str) -> bool:
    return st is not None and _n(s.text_of(st)) == f"{name}=kc_block_reduce<{op}>({name});"


def online_softmax(src: str, kernel: str) -> tuple[str | None, str]:
    """(the rewritten source, "") or (None, why not)."""
    s = Source(src)
    fn = find_function(s, kernel)
    if fn is None:
        return None, f"{kernel} is not defined"
    pi = per_index(s, kernel)  # one row per thread: its work; else each block of the body
    blocks = [pi.stmts] if pi is not None else \
        [[c for c in b.named_children if c.type != "comment"] for b in walk(fn)
         if b.type == "compound_statement"]
    why = "no running-maximum loop (mx = fmaxf(mx, x[j])) followed by an exp-sum loop"
    for stmts in blocks:
        out, why2 = _in_block(s, fn, stmts)
        if out is not None:
            return out, ""
        why = why2 or why
    return None, why


def _in_block(s: Source, fn: Node, stmts: list[Node]) -> tuple[str | None, str | None]:
    """The rewrite on one list of sibling statements: (source, None), or (None, why not;
    None when no running-maximum loop is there)."""
    # stays long: one walk over the statements, matching the two loops and the statements
    # around them, then the edits they need
    for k, l1 in enumerate(stmts):
        if l1.type != "for_statement":
            continue
        got = _max_loop(s, l1)
        h1 = _header(s, l1)
        if got is None or h1 is None:
            continue
        mx, xval = got
        block = _reduce_call(s, stmts[k + 1] if k + 1 < len(stmts) else None, mx,
                             "kc_op_max")
        rest = stmts[k + (2 if block else 1):]
        l2i = next((i for i, st in enumerate(rest) if st.type == "for_statement"), None)
        if l2i is None:
            return None, "no loop after the running maximum"
        l2, between = rest[l2i], rest[:l2i]
        if any(st.type != "declaration" or _uses(st, mx) for st in between):
            return None, f"statements between the two loops use {mx} or are not declarations"
        got2 = _sum_loop(s, l2, mx)
        h2 = _header(s, l2)
        if got2 is None or h2 is None:
            return None, "the loop after the maximum is not sum += exp(x - max)"
        total, expf, x2, store = got2
        if _n(x2) != _n(s.text_of(xval)):
            return None, "the two loops exponentiate and compare different values"
        var, start2, cond2, upd2 = h2
        var1, start1, cond1, upd1 = h1
        if (var1, cond1, upd1) != (var, cond2, upd2) or start2 != "0":
            return None, "the two loops do not walk the same range"
        d_mx, d_sum = _decl_of(stmts[:k], mx), _decl_of(stmts[:k] + between, total)
        if d_mx is None or d_sum is None or len(list(declarators(d_mx))) != 1 or \
                len(list(declarators(d_sum))) != 1:
            return None, "the maximum and the sum are not declared on their own"
        init_mx = _n(s.text_of(next(declarators(d_mx))[1] or d_mx))
        x_at_0 = _n(re.sub(rf"\b{re.escape(var)}\b", "0", s.text_of(xval)))
        if not ((start1 == "1" and init_mx == x_at_0) or (start1 == "0" and init_mx in _NEG_INF)):
            return None, "the maximum does not start from the row's first value or -INFINITY"
        init_sum = next(declarators(d_sum))[1]
        if init_sum is None or not re.fullmatch(r"0(\.0*)?[fF]?", _n(s.text_of(init_sum))):
            return None, "the sum does not start at 0"
        after = stmts[stmts.index(l2) + 1:]
        if block and not _reduce_call(s, after[0] if after else None, total, "kc_op_sum"):
            return None, "the block's maximum is reduced but not its sum"
        edits = []
        ty = s.text_of(d_mx.child_by_field_name("type")).strip()
        mx_init = next(declarators(d_mx))[1]
        edits.append(Edit(mx_init.start_byte, mx_init.end_byte, "-INFINITY"))
        end1 = (stmts[k + 1] if block else l1).end_byte
        edits.append(Edit(s.line_start(l1), end1 + 1 if s.data[end1:end1 + 1] == b"\n" else
                          end1, ""))
        pad = s.indent_of(l2) + "    "
        x = s.text_of(xval)
        body = (f"{{  // kernelcrew online_softmax: the maximum and the sum in one pass\n"
                f"{pad}const {ty} kc_x = {x};\n"
                f"{pad}if (kc_x > {mx}) {{\n"
                f"{pad}    {total} = {total} * {expf}({mx} - kc_x);\n"
                f"{pad}    {mx} = kc_x;\n"
                f"{pad}}}\n"
                f"{pad}{total} += {expf}(kc_x - {mx});\n"
                f"{s.indent_of(l2)}}}")
        b2 = l2.child_by_field_name("body")
        edits.append(Edit(b2.start_byte, b2.end_byte, body))
        if block:
            r = after[0]
            edits.append(Edit(r.start_byte, r.end_byte,
                              f"kc_block_online_softmax({mx}, {total});"))
            helpers = online_helpers_edit(s, fn)
            if helpers is not None:
                edits.append(helpers)
        if store is not None:
            if not _rewritten_later(s, after, store, var, cond2, upd2):
                return None, (f"{store} keeps the exponentials: no later loop over the row "
                              f"writes every {store}[{var}]")
            more = _reread(s, after, store, var, cond2, upd2, f"{expf}({x} - {mx})")
            if isinstance(more, str):
                return None, more
            edits += more
        if any(n.type == "identifier" and n.text.decode() == "kc_x" for n in walk(fn)):
            return None, "the name kc_x is taken"
        out = apply_edits(s, edits)
        return (None, "the rewrite does not parse") if Source(out).has_errors() else (out, None)
    return None, None


def _rewritten_later(s: Source, after: list[Node], store: str, var: str, cond: str,
                     upd: str) -> bool:
    """A later top-level loop over the same range writes `store[var]` in every iteration."""
    for st in after:
        h = _header(s, st) if st.type == "for_statement" else None
        if h is None or (h[0], h[2], h[3]) != (var, cond, upd) or h[1] != "0":
            continue
        for x in _body_stmts(st):
            e = x.named_children[0] if x.type == "expression_statement" and \
                x.named_children else None
            if e is not None and e.type == "assignment_expression" and \
                    _n(s.text_of(e.child_by_field_name("left"))) == f"{store}[{var}]":
                return True
    return False


def _reread(s: Source, after: list[Node], store: str, var: str, cond: str, upd: str,
            value: str) -> list[Edit] | str:
    """Edits that compute the exponentials again where later code read them from Y."""
    edits = []
    for st in after:
        for n in walk(st):
            if n.type != "identifier" or n.text.decode() != store:
                continue
            sub = n.parent
            if sub.type != "subscript_expression" or \
                    _n(s.text_of(sub)) != f"{store}[{var}]":
                return f"{store} is used other than as {store}[{var}] after the sum"
            lp = sub.parent
            while lp is not None and lp.type != "for_statement":
                lp = lp.parent
            h = _header(s, lp) if lp is not None else None
            if h is None or (h[0], h[2], h[3]) != (var, cond, upd) or h[1] != "0":
                return f"{store}[{var}] is read outside a loop over the same range"
            a = sub.parent
            if a.type == "assignment_expression" and a.child_by_field_name("left") == sub:
                if a.child_by_field_name("operator").type != "=":
                    edits.append(Edit(a.start_byte, a.end_byte, f"{s.text_of(sub)} = ({value}) "
                                      f"{a.child_by_field_name('operator').type[:-1]} "
                                      f"({s.text_of(a.child_by_field_name('right'))})"))
                continue  # the final store stays
            edits.append(Edit(sub.start_byte, sub.end_byte, f"({value})"))
    return edits


def why_not(kf: KernelFile) -> str:
    reasons = []
    for e in entries(kf):
        out, why = online_softmax(kf.body, e)
        if out is None:
            reasons.append(f"{e}(): {why}")
    return "; ".join(reasons[:3]) or "no launched kernel"


def online_softmax_in_file(kf: KernelFile, p: dict[str, Any]) -> Outcome | None:
    body, changed = kf.body, False
    for e in entries(kf):
        out, _why = online_softmax(body, e)
        if out is not None:
            body, changed = out, True
    return Outcome(body=body) if changed else None
