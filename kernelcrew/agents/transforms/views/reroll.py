"""Loops unrolled by hand, rolled back: a view the loop moves read first.

The reference BLAS and the C written after it unroll their main loops by hand, a clean-up
loop first for the elements the unroll leaves over:

    m = n % 5;
    for (i = 0; i < m; i++) dtemp = dtemp + dx[i] * dy[i];
    for (i = m; i < n; i += 5)
        dtemp = dtemp + dx[i] * dy[i] + dx[i + 1] * dy[i + 1] + ... + dx[i + 4] * dy[i + 4];

A loop that steps by 5 is what the moves handle worst: `omp simd` vectorizes it with strided
loads (five interleaved streams), nothing else takes it. Rolled back it is the loop the
unroll came from:

    for (i = m; i < n; i++) dtemp = dtemp + dx[i] * dy[i];

which every move reads as an ordinary reduction or independent loop. Two forms are rolled:
one running sum written as a chain, `s = s + T(i) + T(i+1) + ... + T(i+U-1)`, and U
statements, the k-th the first with `i + k` for `i`. Either way the rolled loop performs
the same operations in the same order, so it computes exactly what the unrolled one does.
The rolled loop runs to the end the unrolled one reached: `n` when the start is `n % U`
(then U divides what is left), else `start + (n - start + U - 1) / U * U`.
"""

from __future__ import annotations

import re

from kernelcrew.agents.transforms.analysis.common import finish, model_of, statements
from kernelcrew.csource.syntax import Edit, Loop, Node, Source, lookup, walk

MAX_UNROLL = 16


def _step(s: Source, lp: Loop) -> int | None:
    """U of `i += U` (a literal from 2 to MAX_UNROLL; `Loop.step` is the step's value)."""
    if lp.step is None or lp.step.type != "number_literal":
        return None
    t = s.text_of(lp.step).strip()
    u = int(t) if t.isdigit() else None
    return u if u is not None and 2 <= u <= MAX_UNROLL else None


def _as_copy(text: str, var: str, k: int) -> str | None:
    """The text with `var + k` read back as `var` (None when `var` appears otherwise): what
    the k-th copy of an unrolled body is, written as the first."""
    plain = re.sub(r"\s+", "", text)
    uses = len(re.findall(rf"\b{re.escape(var)}\b", plain))
    if k == 0:
        if re.search(rf"\b{re.escape(var)}\+\d", plain) or re.search(
                rf"\d\+{re.escape(var)}\b", plain):
            return None
        return plain
    pat = rf"\(?\b{re.escape(var)}\+{k}(?!\d)\)?|\(?\b{k}\+{re.escape(var)}\b\)?"
    found = re.findall(pat, plain)
    if len(found) != uses:
        return None
    return re.sub(pat, var, plain)


def _terms(node: Node) -> list[Node]:
    """The operands of a left-leaning chain of `+` (`a + b + c` -> [a, b, c])."""
    if node.type == "binary_expression" and node.child_by_field_name("operator").type == "+":
        return _terms(node.child_by_field_name("left")) + [node.child_by_field_name("right")]
    return [node]


def _rolled_body(s: Source, lp: Loop, u: int) -> str | None:
    """The body of the rolled loop, or None when the body is not an unroll by u."""
    var = lp.var
    sts = [st for st in statements(lp.body) if st.type != "comment"]
    if any(st.type != "expression_statement" for st in sts):
        return None
    if len(sts) == u:  # u copies of one statement
        first = _as_copy(s.text_of(sts[0]), var, 0)
        if first is None or not re.search(rf"\b{re.escape(var)}\b", first):
            return None
        if all(_as_copy(s.text_of(st), var, k) == first for k, st in enumerate(sts)):
            return s.text_of(sts[0])
        return None
    if len(sts) != 1 or not sts[0].named_children:
        return None
    e = sts[0].named_children[0]
    if e.type != "assignment_expression" or e.child_by_field_name("operator").type != "=":
        return None
    left, right = e.child_by_field_name("left"), e.child_by_field_name("right")
    if left.type != "identifier":
        return None
    terms = _terms(right)
    acc = left.text.decode()
    if len(terms) != u + 1 or terms[0].type != "identifier" or terms[0].text.decode() != acc:
        return None
    first = _as_copy(s.text_of(terms[1]), var, 0)
    if first is None or not re.search(rf"\b{re.escape(var)}\b", first) or \
            re.search(rf"\b{re.escape(acc)}\b", first):
        return None
    if not all(_as_copy(s.text_of(t), var, k) == first for k, t in enumerate(terms[1:])):
        return None
    return f"{acc} = {acc} + {s.text_of(terms[1])};"


def _function(node: Node) -> Node:
    while node.parent is not None and node.type != "function_definition":
        node = node.parent
    return node


def _assignments(fn: Node, name: str) -> list[Node]:
    """The assignments and ++/-- of `name` in the function."""
    out = []
    for n in walk(fn):
        target = n.child_by_field_name("left") if n.type == "assignment_expression" else \
            n.child_by_field_name("argument") if n.type == "update_expression" else None
        if target is not None and target.type == "identifier" and target.text.decode() == name:
            out.append(n)
    return out


def _is_rest(s: Source, expr: Node | None, end: str, u: int) -> bool:
    return expr is not None and re.fullmatch(
        rf"\(?\s*{re.escape(end)}\s*\)?\s*%\s*{u}", s.text_of(expr).strip()) is not None


def _end(s: Source, lp: Loop, u: int) -> str:
    """Where the rolled loop stops: the end itself when the start is `end % u` (what is
    left is a multiple of u), else the end of the last group the unrolled loop ran."""
    start, end = s.text_of(lp.start).strip(), s.text_of(lp.end).strip()
    fn = _function(lp.node)
    fixed_end = (lp.end.type == "identifier" and not _assignments(fn, end)) or \
        lp.end.type == "number_literal"
    if lp.start.type == "identifier" and fixed_end:
        d = lookup(start, lp.node)
        sets = _assignments(fn, start)
        if d is not None and not sets and _is_rest(s, d.init, end, u):
            return end  # `int m = n % u;`
        if d is not None and d.init is None and len(sets) == 1 and \
                sets[0].child_by_field_name("operator").type == "=" and \
                sets[0].parent.type == "expression_statement" and \
                sets[0].parent.parent == fn.child_by_field_name("body") and \
                sets[0].end_byte < lp.node.start_byte and \
                _is_rest(s, sets[0].child_by_field_name("right"), end, u):
            return end  # `m = n % u;` once, at the top of the function, before the loop
    if start == "0":
        return f"({end} + {u - 1}) / {u} * {u}"
    return f"{start} + ({end} - {start} + {u - 1}) / {u} * {u}"


def reroll(src: str, entry: str) -> str | None:
    """Every hand-unrolled loop of `entry` rolled back (see the module text); None where
    there is none."""
    got = model_of(src, entry)
    if got is None:
        return None
    s, m = got
    edits = []
    for lp in m.loops:
        if lp.children or not lp.canonical or lp.inclusive:
            continue
        u = _step(s, lp)
        if u is None:
            continue
        if any(n.type in ("preproc_call",) for n in walk(lp.node)):
            continue
        # the counter itself is not written in the body
        if any(n.type in ("assignment_expression", "update_expression") and
               (n.child_by_field_name("left") or n.child_by_field_name("argument")).type ==
               "identifier" and (n.child_by_field_name("left") or
                                 n.child_by_field_name("argument")).text.decode() == lp.var
               for n in walk(lp.body)):
            continue
        body = _rolled_body(s, lp, u)
        if body is None:
            continue
        end = _end(s, lp, u)
        init = s.data[lp.node.child_by_field_name("initializer").start_byte:
                      lp.node.child_by_field_name("initializer").end_byte].decode()
        init = init.rstrip(";").strip()
        ind = s.indent_of(lp.node)
        text = f"for ({init}; {lp.var} < {end}; {lp.var}++) {{  // kernelcrew: rolled back " \
               f"(unrolled by {u})\n{ind}    {body}\n{ind}}}"
        edits.append(Edit(lp.node.start_byte, lp.node.end_byte, text))
    return finish(s, edits) if edits else None
