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


# ---------------------------------------------------------------- pointers stepped beside a counter

def _comma_parts(n: Node) -> list[Node]:
    """`a, b, c` as [a, b, c] (a single expression as [it])."""
    if n.type != "comma_expression":
        return [n]
    left, right = n.child_by_field_name("left"), n.child_by_field_name("right")
    return _comma_parts(left) + _comma_parts(right) if left is not None and right is not None \
        else [n]


def _unit_step(n: Node, name: str) -> bool:
    """`++c`, `c++`, `c += 1`."""
    if n.type == "update_expression":
        arg = n.child_by_field_name("argument")
        return arg is not None and arg.text.decode() == name and "++" in n.text.decode()
    if n.type == "assignment_expression" and n.child_by_field_name("operator").type == "+=":
        return n.child_by_field_name("left").text.decode() == name and \
            n.child_by_field_name("right").text.decode().strip() == "1"
    return False


def _pointer_step(n: Node, name: str) -> Node | str | None:
    """The step of `p += st` (its node), `++p` / `p++` ("1"); None for anything else."""
    if n.type == "update_expression":
        arg = n.child_by_field_name("argument")
        return "1" if arg is not None and arg.text.decode() == name and \
            "++" in n.text.decode() else None
    if n.type == "assignment_expression" and n.child_by_field_name("operator").type == "+=" \
            and n.child_by_field_name("left").text.decode() == name:
        return n.child_by_field_name("right")
    return None


def _comma_once(s: Source, m) -> str | None:
    for f in walk(m.body):
        if f.type != "for_statement":
            continue
        init, cond = f.child_by_field_name("initializer"), f.child_by_field_name("condition")
        upd, body = f.child_by_field_name("update"), f.child_by_field_name("body")
        if None in (init, cond, upd, body) or init.type != "comma_expression" or \
                cond.type != "binary_expression":
            continue
        counter = cond.child_by_field_name("left").text.decode()
        sets = {}
        for part in _comma_parts(init):
            if part.type != "assignment_expression" or \
                    part.child_by_field_name("operator").type != "=" or \
                    part.child_by_field_name("left").type != "identifier":
                break
            sets[part.child_by_field_name("left").text.decode()] = part
        else:
            steps = {}
            for part in _comma_parts(upd):
                names = [x for x in sets if _unit_step(part, x) or _pointer_step(part, x)]
                if len(names) != 1:
                    break
                steps[names[0]] = part
            else:
                got = _split_walks(s, m, f, counter, sets, steps, body)
                if got is not None:
                    return got
    return None


def _split_walks(s: Source, m, f: Node, counter: str, sets: dict, steps: dict,
                 body: Node) -> str | None:
    """`for (c = a, p = e; c < n; ++c, p += st) S` -> `for (c = a; c < n; ++c)
    { T *p = e + (c - a) * st; S }` where each p is a pointer declared before the loop,
    used nowhere after it, written nowhere in S, and e and st are fixed in the loop."""
    if counter not in sets or set(steps) != set(sets) or not _unit_step(steps[counter],
                                                                         counter):
        return None
    start = fixed_text(s, m, sets[counter].child_by_field_name("right"), f)
    if start is None or any(x.type in ("assignment_expression", "update_expression") and
                            (x.child_by_field_name("left") or
                             x.child_by_field_name("argument")).text.decode() == counter
                            for x in walk(body)):
        return None
    pos = counter if start == "0" else f"({counter} - ({start}))"
    decls = []
    for name, part in sets.items():
        if name == counter:
            continue
        d = lookup(name, part)
        step = _pointer_step(steps[name], name)
        if d is None or not d.pointer or within(d.node, f) or step is None:
            return None
        value = fixed_text(s, m, part.child_by_field_name("right"), f)
        st = step if isinstance(step, str) else fixed_text(s, m, step, f)
        if value is None or st is None:
            return None
        uses = [u for u in walk(m.fn) if u.type == "identifier" and u.text.decode() == name
                and (e := lookup(name, u)) is not None and e.key == d.key
                and not within(u, d.node)]
        if any(not within(u, f) for u in uses) or any(
                (x.child_by_field_name("left") or x.child_by_field_name("argument")) is not None
                and (x.child_by_field_name("left") or
                     x.child_by_field_name("argument")).text.decode() == name
                for x in walk(body) if x.type in ("assignment_expression", "update_expression")):
            return None
        decl = d.node
        first = next((c for c in decl.named_children if c.type in (
            "init_declarator", "pointer_declarator", "identifier", "array_declarator")), None)
        if decl.type != "declaration" or first is None:
            return None
        typ = " ".join(s.data[decl.start_byte:first.start_byte].decode().split())
        off = pos if st == "1" else f"{pos} * ({st})"
        decls.append(f"{typ} *{name} = ({value}) + {off};")
    init, upd = f.child_by_field_name("initializer"), f.child_by_field_name("update")
    edits = [Edit(init.start_byte, init.end_byte, s.text_of(sets[counter])),
             Edit(upd.start_byte, upd.end_byte, s.text_of(steps[counter]))]
    lead = " ".join(decls)
    if body.type == "compound_statement":
        edits.append(Edit(body.start_byte + 1, body.start_byte + 1, f" {lead}"))
    else:
        bind = s.indent_of(body)
        edits.append(Edit(body.start_byte, body.end_byte,
                          f"{{ {lead}\n{bind}{s.text_of(body)}\n{bind}}}"))
    return finish(s, edits)


def split_comma_walks(src: str, entry: str) -> str | None:
    """Pointers a `for` steps beside its counter (`for (j = 0, p = b; j < n; ++j, p += ld)`)
    computed from the counter in the body instead, so the loop is a plain counted loop and
    each iteration's pointer is known (`_split_walks`)."""
    return repeat(src, entry, _comma_once)
