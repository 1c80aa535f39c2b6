"""Pointer increments as subscripts, so the dependence analysis sees which element each
iteration touches.

C code walks arrays with pointers it bumps as it goes:

    const float* src = x;  float* dst = y;
    for (size_t r = 0; r < rows; ++r)
        for (size_t c = 0; c < cols; ++c) *dst++ = f(*src++);

The pointer is a loop-carried scalar, so no iteration can run before the one before it.
When the pointer moves by exactly one element per innermost iteration, unconditionally,
in a rectangular nest of unit-step loops, its value is known at every point: here
`src + (r * cols + c)` with `src` its value before the nest. The increments become
subscripts from the value before the nest:

    for (size_t r = 0; r < rows; ++r)
        for (size_t c = 0; c < cols; ++c) dst[r * cols + c] = f(src[r * cols + c]);

Offered only where nothing else reads or moves the pointer inside the nest, each `*p++` in
a statement of its own innermost loop's body (not under a condition) and the loop bounds
fixed in the nest. A body unrolled by hand walks the pointer k times per iteration: the
j-th walk (in statement order) reads element `k * idx + j`. Where code after the nest
reads the pointer (a loop for the remainder), the nest is followed by the step the walks
made, `p += k * trips` (none where the nest does not run).
"""

from __future__ import annotations

from kernelcrew.agents.transforms.analysis.common import (
    finish,
    fixed_text,
    fresh_name,
    repeat,
)
from kernelcrew.csource.syntax import Edit, Loop, Node, Source, lookup, walk, within

_BRANCHY = ("if_statement", "conditional_expression", "switch_statement", "while_statement",
            "do_statement", "case_statement")


def _deref_increment(n: Node) -> str | None:
    """`*p++` -> "p"."""
    if n.type != "pointer_expression" or n.child_by_field_name("operator").type != "*":
        return None
    arg = n.child_by_field_name("argument")
    while arg is not None and arg.type == "parenthesized_expression" and arg.named_children:
        arg = arg.named_children[0]
    if arg is None or arg.type != "update_expression" or "++" not in arg.text.decode() or \
            arg.text.decode().startswith("++"):
        return None
    p = arg.child_by_field_name("argument")
    return p.text.decode() if p is not None and p.type == "identifier" else None


def _conditional(n: Node, lp: Loop) -> bool:
    p = n.parent
    while p is not None and p != lp.body:
        if p.type in _BRANCHY or (p.type == "binary_expression" and
                                  p.child_by_field_name("operator").type in ("&&", "||")):
            return True
        p = p.parent
    return False


def _trip(s: Source, m, lp: Loop, at: Node) -> str | None:
    """The trip count of a unit-step loop as text fixed at `at`, with its start."""
    if not lp.canonical or lp.step is not None or lp.inclusive:
        return None
    end = fixed_text(s, m, lp.end, at)  # the same value all through the nest
    start = fixed_text(s, m, lp.start, at)
    if end is None or start is None:
        return None
    return end if start == "0" else f"({end} - {start})"


def _index(s: Source, m, lp: Loop, top: Loop) -> str | None:
    """The number of innermost iterations of the nest `top` done before the current one
    of `lp`, as an expression."""
    chain = []
    cur: Loop | None = lp
    while cur is not None:
        chain.append(cur)
        if cur is top:
            break
        cur = cur.parent
    if chain[-1] is not top:
        return None
    terms = []
    stride = ""
    for k, c in enumerate(chain):
        trip = _trip(s, m, c, top.node)
        start = fixed_text(s, m, c.start, top.node)
        if trip is None or start is None:
            return None
        if k and (len(c.children) != 1 or _conditional(chain[k - 1].node, c)):
            return None  # the loop below runs once per iteration, and only it
        pos = c.var if start == "0" else f"({c.var} - {start})"
        terms.append(f"{pos}{stride}")
        stride += f" * {trip if trip.replace('_', '').isalnum() else f'({trip})'}"
    return " + ".join(reversed(terms))


def _statement_of(n: Node, body: Node) -> Node | None:
    """The statement of the loop body `body` that holds `n`."""
    p = n
    while p is not None and p.parent is not None and p.parent != body:
        p = p.parent
    return p if p is not None and p.parent == body else None


def _total(s: Source, m, top: Loop, inner: Loop) -> str | None:
    """The innermost iterations of the whole nest, as text fixed before it (None where a
    loop's trip is not fixed there)."""
    trips = []
    cur: Loop | None = inner
    while cur is not None:
        t = _trip(s, m, cur, top.node)
        if t is None:
            return None
        trips.append(f"(long long)({t})")
        if cur is top:
            break
        cur = cur.parent
    return " * ".join(reversed(trips))


def _once(s: Source, m) -> str | None:
    sites: dict[str, list[Node]] = {}
    for n in walk(m.body):
        name = _deref_increment(n)
        if name is not None:
            sites.setdefault(name, []).append(n)
    groups: list[tuple[str, Loop, list[Node]]] = []  # (pointer, its loop, its walks there)
    for name, nodes in sites.items():
        by_loop: dict[int, tuple[Loop, list[Node]]] = {}
        for x in nodes:
            lp = next((lp for lp in reversed(m.loops) if within(x, lp.body)), None)
            if lp is not None:
                by_loop.setdefault(lp.node.start_byte, (lp, []))[1].append(x)
        groups += [(name, lp, xs) for lp, xs in by_loop.values()]
    for name, inner, nodes in groups:
        d = lookup(name, nodes[0])
        if d is None or not d.pointer:
            continue
        if inner.children or any(_conditional(x, inner) for x in nodes):
            continue
        # several walks per iteration (a body unrolled by hand): each in a statement of its
        # own, taken in the statements' order
        stmts = [_statement_of(x, inner.body) for x in nodes]
        if any(st is None for st in stmts) or \
                len({st.start_byte for st in stmts if st is not None}) != len(nodes):
            continue
        # the outermost loop inside the pointer's scope whose body holds the site
        top = inner
        while top.parent is not None and not within(d.node, top.parent.node):
            top = top.parent
        if within(d.node, top.node):
            continue
        # no other use of the pointer in the nest
        uses = [u for u in walk(m.fn) if u.type == "identifier" and u.text.decode() == name
                and lookup(name, u) is not None and lookup(name, u).key == d.key]
        inside = [u for u in uses if within(u, top.node)]
        if len(inside) != len(nodes):
            continue
        idx = _index(s, m, inner, top)
        if idx is None:
            continue
        # each loop of the chain runs only the one nest below it: no break or continue
        if any(n.type in ("break_statement", "continue_statement", "goto_statement",
                          "return_statement") for n in walk(top.node)):
            continue
        k = len(nodes)
        edits = [Edit(x.start_byte, x.end_byte,
                      f"{name}[{idx}]" if k == 1 else f"{name}[{k} * ({idx}) + {j}]")
                 for j, x in enumerate(sorted(nodes, key=lambda x: x.start_byte))]
        if any(u.start_byte > top.node.end_byte for u in uses):
            # read after the nest: it moves on by what the walks covered, as it did
            total = _total(s, m, top, inner)
            if total is None or top.node.parent is None or \
                    top.node.parent.type != "compound_statement":
                continue
            n_all = fresh_name(m, f"{name}_walked")
            ind = s.indent_of(top.node)
            edits.append(Edit(top.node.end_byte, top.node.end_byte,
                              f"\n{ind}{{ const long long {n_all} = {total}; "
                              f"if ({n_all} > 0) {name} += {k} * {n_all}; }}"))
        return finish(s, edits)
    return None


def index_pointers(src: str, entry: str) -> str | None:
    """Turn the `*p++` walks of `entry` into subscripts where legal (module docstring)."""
    return repeat(src, entry, _once)
