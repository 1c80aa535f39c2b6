"""An array element used as an accumulator, kept in a local for the loops that update it.

Real code sums straight into the output:

    for (ch = 0; ch < c; ++ch) {
        var[ch] = 0;
        for (b = 0; b < n; ++b)
            for (p = 0; p < hw; ++p) var[ch] += f(x[...]);
        var[ch] *= norm;
    }

To the moves `var[ch]` is a store every inner iteration makes to the same element, not
a reduction: no accumulators, no omp simd, no jam. When every access to the array inside
a loop is that one element, with a subscript nothing in the loop changes, the element
lives in a local for the loop and is stored once after it:

        float var_acc = var[ch];
        for (b = 0; b < n; ++b)
            for (p = 0; p < hw; ++p) var_acc += f(x[...]);
        var[ch] = var_acc;

The same operations in the same order, so the same result. Offered only for an array
that is a pointer parameter of the function (the scope analysis gives distinct buffers
for those, so nothing else in the loop reaches the element), for a loop that is a
statement of a block or the unbraced body of a loop (which then gets braces) and
holds no return or goto, with no access in the loop's header.
"""

from __future__ import annotations

import re

from kernelcrew.agents.transforms.analysis.common import finish, repeat
from kernelcrew.agents.transforms.analysis.types import resolve
from kernelcrew.csource.syntax import (
    Edit,
    Node,
    Source,
    array_dims,
    lead_start,
    lookup,
    params,
    pragmas_before,
    subscript_index,
    walk,
    within,
)

_ELEMENT = {"float", "double", "int", "int32_t", "int64_t", "long"}
_WRITES = ("assignment_expression", "update_expression")


def _assigned(n: Node) -> str | None:
    """The identifier an assignment or ++/-- writes, when it writes a plain name."""
    target = n.child_by_field_name("left") if n.type == "assignment_expression" else \
        n.child_by_field_name("argument")
    return target.text.decode() if target is not None and target.type == "identifier" else None


def _element_type(s: Source, fn: Node, name: str) -> str | None:
    """The element type of pointer or array parameter `name` as the code spells it
    (`DATA_TYPE` after `typedef double DATA_TYPE;`), when it is a plain arithmetic type."""
    for p in params(fn):
        if p.name == name and p.pointer is not None:
            base = " ".join(re.sub(r"\b(const|volatile|restrict|__restrict__|__restrict)\b",
                                   "", p.node.child_by_field_name("type").text.decode()
                                   ).split())
            return base if resolve(s, base) in _ELEMENT else None
    return None


def _once(s: Source, m) -> str | None:
    # stays long: one walk over the loops, outermost first, with the checks in the order a
    # reader would make them; each needs the element and loop found before it
    fn = m.fn
    for lp in m.loops:  # outer loops first: the widest loop over which the element is fixed
        if lp.node.parent is None or lp.node.parent.type not in (
                "compound_statement", "for_statement", "while_statement", "do_statement"):
            continue
        braced = lp.node.parent.type == "compound_statement"
        if not braced and lp.node.parent.child_by_field_name("body") != lp.node:
            continue
        if any(n.type in ("return_statement", "goto_statement") for n in walk(lp.node)):
            continue
        if pragmas_before(lp.node):
            continue  # a pragma on the loop itself (a shared local would race under omp)
        written = {_assigned(n) for n in walk(lp.node) if n.type in _WRITES} - {None}
        if lp.var:
            written.add(lp.var)
        subs: dict[str, list[Node]] = {}
        chains: dict[int, list[Node | None]] = {}  # site start -> its indices
        for n in walk(lp.body):
            if n.type == "subscript_expression":
                arr = n.child_by_field_name("argument")
                if arr is not None and arr.type == "identifier":
                    top, idx = _element_site(n)
                    subs.setdefault(arr.text.decode(), []).append(top)
                    chains[top.start_byte] = idx
        for name, sites in subs.items():
            d = lookup(name, lp.node)
            typ = _element_type(s, fn, name)
            if d is None or not d.param or typ is None:
                continue
            dims = array_dims(d.node, name)
            indices = [chains[x.start_byte] for x in sites]
            if any(i is None for idx in indices for i in idx) or \
                    any(len(idx) != (len(dims) if dims else 1) for idx in indices):
                continue  # a row of a 2D array (`cov[i]`) is not an element
            if len({"][".join(" ".join(s.text_of(i).split()) for i in idx)
                    for idx in indices}) != 1:
                continue
            if any(n.type in ("call_expression", "update_expression", "assignment_expression")
                   for i in indices[0] for n in walk(i)):
                continue
            names = [n for i in indices[0] for n in walk(i) if n.type == "identifier"]
            if any(n.text.decode() in written or ((dn := lookup(n.text.decode(), n)) is not None
                                                   and within(dn.node, lp.node))
                   for n in names):
                continue  # the element changes inside the loop
            # the array is reached only through these subscripts in the loop, and one of
            # them is written (else there is nothing to keep)
            uses = [n for n in walk(lp.node) if n.type == "identifier" and n.text.decode() == name]
            if len(uses) != len(sites) or any(not within(x, lp.body) for x in sites):
                continue
            if not any(x.parent is not None and x.parent.type in _WRITES and
                       same_target(x) for x in sites):
                continue
            # a fresh name: another copy of the loop (a threaded and a serial version)
            # may have its own accumulator already
            taken = {n.text.decode() for n in walk(fn) if n.type == "identifier"}
            acc = next(f"{name}_acc{k or ''}" for k in range(len(taken) + 2)
                       if f"{name}_acc{k or ''}" not in taken)
            elem = sites[0].text.decode()
            ind = s.indent_of(lp.node)
            edits = [Edit(x.start_byte, x.end_byte, acc) for x in sites]
            first = _initial_store(s, lp.node, elem, name) if braced else None
            if first is not None:  # `elem = c;` right before: the local starts at c
                store, value = first
                edits.append(Edit(s.line_start(store), store.end_byte,
                                  f"{ind}{typ} {acc} = {value};"))
            elif braced:
                edits.append(Edit(lead_start(s, lp.node), lead_start(s, lp.node),
                                  f"{ind}{typ} {acc} = {elem};\n"))
            if braced:
                edits.append(Edit(lp.node.end_byte, lp.node.end_byte,
                                  f"\n{ind}{elem} = {acc};"))
            else:  # the unbraced body of a loop: the three statements become its block
                outer = s.indent_of(lp.node.parent)
                start = lead_start(s, lp.node)
                edits.append(Edit(start, start, f"{outer}{{\n{ind}{typ} {acc} = {elem};\n"))
                edits.append(Edit(lp.node.end_byte, lp.node.end_byte,
                                  f"\n{ind}{elem} = {acc};\n{outer}}}"))
            return finish(s, edits)
    return None


def _initial_store(s: Source, loop: Node, elem: str, name: str) -> tuple[Node, str] | None:
    """`elem = value;` before the loop with only statements that do not name the array
    between (declarations, other initial stores), `value` free of calls, writes and the
    array itself: the store is dead (nothing reads the array before the loop, the loop
    does not read it but through the local, and the local is stored back after it), so
    the local starts at `value`, declared where the store was. (the statement, the
    value's text)"""
    prev = loop.prev_named_sibling
    while prev is not None and prev.type in ("expression_statement", "declaration") and \
            not any(n.type == "identifier" and n.text.decode() == name for n in walk(prev)) \
            and not any(n.type == "call_expression" for n in walk(prev)):
        prev = prev.prev_named_sibling
    if prev is None or prev.type != "expression_statement" or not prev.named_children:
        return None
    e = prev.named_children[0]
    if e.type != "assignment_expression" or e.child_by_field_name("operator").type != "=":
        return None
    left, right = e.child_by_field_name("left"), e.child_by_field_name("right")
    if "".join(s.text_of(left).split()) != "".join(elem.split()):
        return None
    if any(n.type in ("call_expression", "assignment_expression", "update_expression") or
           (n.type == "identifier" and n.text.decode() == name) for n in walk(right)):
        return None
    if s.data[s.line_start(prev):prev.start_byte].strip():
        return None  # shares its line with another statement
    return prev, s.text_of(right)


def _element_site(n: Node) -> tuple[Node, list[Node | None]]:
    """The whole access `a[i][j]` that the subscript `a[i]` opens, and its indices."""
    top, idx = n, [subscript_index(n)]
    while top.parent is not None and top.parent.type == "subscript_expression" and \
            top.parent.child_by_field_name("argument") is not None and \
            top.parent.child_by_field_name("argument").start_byte == top.start_byte and \
            top.parent.child_by_field_name("argument").end_byte == top.end_byte:
        top = top.parent
        idx.append(subscript_index(top))
    return top, idx


def same_target(x: Node) -> bool:
    """`x` is what its parent assignment or ++/-- writes."""
    p = x.parent
    target = p.child_by_field_name("left") if p.type == "assignment_expression" else \
        p.child_by_field_name("argument")
    return target is not None and target.start_byte == x.start_byte


def scalarize(src: str, entry: str) -> str | None:
    """Keep array elements used as accumulators in locals where legal (module docstring);
    None when none applies."""
    return repeat(src, entry, _once)
