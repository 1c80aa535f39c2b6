"""Counted `while` loops written as `for` loops, so the loop moves see a trip count.

Real C walks its buffers with `while` loops the analysis cannot count:

    const unsigned char* ip = src;  const unsigned char* const end = ip + size;
    while (ip < end) count[*ip++]++;          // a pointer up to an end
    while (n--) *dst++ = *src++ * a;          // a count down to zero
    while (blk > 0U) { *d++ = *a++ + *b++; blk--; }   // ... stepped as a statement

Both run a number of times fixed before the loop: `end - ip` (none when it is not
positive), and `n`. Written as `for` loops over a fresh counter, with the body as it was,

    const long long ip_trip = (long long)(end - ip);
    for (long long ip_k = 0; ip_k < ip_trip; ++ip_k) count[*ip++]++;

they are the walks `pointer_walks` turns into subscripts (`count[ip[ip_k]]++`), and then the
loops every move takes.

A pointer loop (`p < end`, `p != end`, `end > p`) is rewritten only when its body moves
`p` by exactly one element, unconditionally, once per iteration (`p++`, `++p`, `*p++`,
`p += 1`, as a statement of the body or inside one, never under a condition or a
short-circuit), writes neither `p` otherwise nor anything `end` is made of, and has no
`break`, `continue`, `goto` or `return` of its own. A count-down (`while (n--)`,
`while (n-- > 0)`) is rewritten only when `n` is an integer variable that the body does
not use and nothing reads after the loop (its final value, -1 or the unsigned maximum, is
not kept), declared inside the loops around it, if any (an outer iteration would read
it again), under the same rule on jumps.
"""

from __future__ import annotations

import re

from kernelcrew.agents.transforms.analysis.common import finish, fresh_name, repeat
from kernelcrew.csource.syntax import Edit, Node, Source, lookup, walk, within

_LOOPS = ("for_statement", "while_statement", "do_statement")
_BRANCHY = ("if_statement", "conditional_expression", "switch_statement", "case_statement",
            *_LOOPS)
_INT = re.compile(r"(const\s+)?(unsigned\s+|signed\s+)?(char|short|int|long|long\s+long|"
                  r"unsigned|size_t|ssize_t|ptrdiff_t|u?int(8|16|32|64)_t|std::size_t)")


def _bare(n: Node | None) -> Node | None:
    while n is not None and n.type in ("parenthesized_expression", "condition_clause") and \
            n.named_children:
        n = n.named_children[0]
    return n


def _same_var(n: Node | None, key: str) -> bool:
    n = _bare(n)
    if n is None or n.type != "identifier":
        return False
    d = lookup(n.text.decode(), n)
    return d is not None and d.key == key


def _uses(node: Node, key: str) -> list[Node]:
    return [n for n in walk(node) if n.type == "identifier" and _same_var(n, key)]


def _jumps(loop: Node) -> bool:
    """A break, continue, goto or return that leaves or restarts `loop` itself."""
    for n in walk(loop.child_by_field_name("body")):
        if n.type in ("goto_statement", "return_statement", "throw_statement"):
            return True
        if n.type in ("break_statement", "continue_statement"):
            p = n.parent
            while p is not None and p.type not in _LOOPS and not (
                    n.type == "break_statement" and p.type == "switch_statement"):
                p = p.parent
            if p == loop:
                return True
    return False


def _written(n: Node) -> bool:
    """`n` (an identifier) is assigned, incremented or has its address taken."""
    p = n.parent
    while p is not None and p.type == "parenthesized_expression":
        n, p = p, p.parent
    if p is None:
        return False
    if p.type == "assignment_expression" and p.child_by_field_name("left") == n:
        return True
    if p.type == "update_expression":
        return True
    return p.type == "pointer_expression" and p.child_by_field_name("operator").type == "&"


def _bump(n: Node, key: str) -> bool:
    """`n` is `p++`, `++p` or `p += 1` on the pointer `key` (`*p++` holds `p++`)."""
    if n.type == "update_expression":
        return "++" in n.text.decode() and _same_var(n.child_by_field_name("argument"), key)
    if n.type == "assignment_expression" and n.child_by_field_name("operator").type == "+=":
        return _same_var(n.child_by_field_name("left"), key) and \
            n.child_by_field_name("right").text.decode().strip() == "1"
    return False


def _unconditional(n: Node, body: Node) -> bool:
    p = n.parent
    while p is not None and p != body:
        if p.type in _BRANCHY or (p.type == "binary_expression" and
                                  p.child_by_field_name("operator").type in ("&&", "||")):
            return False
        p = p.parent
    return True


def _pointer_trip(s: Source, loop: Node) -> tuple[str, str] | None:
    """(pointer name, trip count text) of `while (p < end)` whose body bumps p once."""
    cond = _bare(loop.child_by_field_name("condition"))
    if cond is None or cond.type != "binary_expression":
        return None
    op = cond.child_by_field_name("operator").type
    left, right = _bare(cond.child_by_field_name("left")), _bare(cond.child_by_field_name("right"))
    if op in ("<", "!="):
        p, end = left, right
    elif op == ">":
        p, end = right, left
    else:
        return None
    if p is None or p.type != "identifier":
        return None
    d = lookup(p.text.decode(), p)
    if d is None or not d.pointer or d.array:
        return None
    body = loop.child_by_field_name("body")
    bumps = [n for n in walk(body) if _bump(n, d.key)]
    writes = [u for u in _uses(body, d.key) if _written(u)]
    if len(bumps) != 1 or len(writes) != 1 or not _unconditional(bumps[0], body):
        return None
    for ident in walk(end):
        if ident.type != "identifier":
            continue
        e = lookup(ident.text.decode(), ident)
        if e is None:
            if ident.parent is not None and ident.parent.type == "call_expression":
                return None  # a call in the bound: its value may change
            continue  # a macro or enum constant
        if e.key == d.key or any(_written(u) for u in _uses(body, e.key)):
            return None
    if any(n.type in ("call_expression", "update_expression", "assignment_expression")
           for n in walk(end)):
        return None
    return d.name, f"(long long)({s.text_of(end)} - {d.name})"


def _int_counter(s: Source, var: Node | None):
    """(its declaration, its type without const) of an integer variable, or None."""
    if var is None or var.type != "identifier":
        return None
    d = lookup(var.text.decode(), var)
    if d is None or d.pointer or d.array:
        return None
    ty = d.node.child_by_field_name("type")
    tytext = s.text_of(ty).replace("const", "").strip() if ty is not None else ""
    return (d, tytext) if _INT.fullmatch(tytext) else None


def _count_trip(s: Source, fn: Node, loop: Node) -> tuple[str, str, str] | None:
    """(counter name, its type, trip count text) of `while (n--)` / `while (n-- > 0)`."""
    cond = _bare(loop.child_by_field_name("condition"))
    if cond is not None and cond.type == "binary_expression" and \
            cond.child_by_field_name("operator").type == ">" and \
            cond.child_by_field_name("right").text.decode().strip() == "0":
        cond = _bare(cond.child_by_field_name("left"))
    if cond is None or cond.type != "update_expression" or \
            not cond.text.decode().rstrip().endswith("--"):
        return None
    got = _int_counter(s, _bare(cond.child_by_field_name("argument")))
    if got is None:
        return None
    d, tytext = got
    if _uses(loop.child_by_field_name("body"), d.key):
        return None
    if any(u.start_byte >= loop.end_byte for u in _uses(fn, d.key)):
        return None  # read after the loop: its final value would be lost
    p = loop.parent
    while p is not None and p != fn:
        if p.type in _LOOPS and not within(d.node, p):
            return None  # an outer iteration reads it again
        p = p.parent
    return d.name, tytext, d.name


def _zero(n: Node | None) -> bool:
    return n is not None and n.text.decode().strip().rstrip("uUlL") == "0"


def _after_is_set(fn: Node, loop: Node, key: str) -> bool:
    """Nothing after the loop reads the counter's final value: no use at all, or the first
    use is `n = ...;`, a statement of the block that holds the loop (run right after it)."""
    after = sorted((u for u in _uses(fn, key) if u.start_byte >= loop.end_byte),
                   key=lambda u: u.start_byte)
    if not after:
        return True
    first = after[0]
    a = first.parent
    if a is None or a.type != "assignment_expression" or \
            a.child_by_field_name("operator").type != "=" or \
            a.child_by_field_name("left") != first or \
            any(_same_var(x, key) for x in walk(a.child_by_field_name("right"))):
        return False
    stmt = a.parent
    return stmt is not None and stmt.type == "expression_statement" and \
        stmt.parent is not None and stmt.parent == loop.parent


def _decrement_trip(s: Source, fn: Node, loop: Node) -> tuple[str, str, Node] | None:
    """(counter name, its type, the decrement statement) of `while (n > 0) { ...; n--; }`
    (`0 < n`, and `n != 0` for an unsigned n): the body steps n down by one as one of its
    own statements and uses it nowhere else, so it runs n times (none where n is not
    positive), and nothing after the loop reads the final value (see `_after_is_set`)."""
    cond = _bare(loop.child_by_field_name("condition"))
    if cond is None or cond.type != "binary_expression":
        return None
    op = cond.child_by_field_name("operator").type
    left, right = _bare(cond.child_by_field_name("left")), _bare(cond.child_by_field_name("right"))
    if op in (">", "!=") and _zero(right):
        var = left
    elif op in ("<", "!=") and _zero(left):
        var = right
    else:
        return None
    got = _int_counter(s, var)
    if got is None:
        return None
    d, tytext = got
    if op == "!=" and "unsigned" not in tytext and not re.match(r"(uint|size_t)", tytext):
        return None
    body = loop.child_by_field_name("body")
    if body is None or body.type != "compound_statement":
        return None
    uses = _uses(body, d.key)
    if len(uses) != 1:
        return None
    step = uses[0].parent
    while step is not None and step.type == "parenthesized_expression":
        step = step.parent
    if step is None or not (
            (step.type == "update_expression" and "--" in step.text.decode()) or
            (step.type == "assignment_expression" and
             step.child_by_field_name("operator").type == "-=" and
             step.child_by_field_name("right").text.decode().strip() == "1")):
        return None
    stmt = step.parent
    if stmt is None or stmt.type != "expression_statement" or stmt.parent != body:
        return None
    if not _after_is_set(fn, loop, d.key):
        return None
    p = loop.parent
    while p is not None and p != fn:
        if p.type in _LOOPS and not within(d.node, p) and not _set_before(p, loop, d.key):
            return None  # an outer iteration reads it again
        p = p.parent
    return d.name, tytext, stmt


def _set_before(outer: Node, loop: Node, key: str) -> bool:
    """Inside `outer`, the counter is set by a plain assignment before `loop` (so each
    outer iteration starts it afresh): `n = len; while (n > 0) {...}`."""
    prev = loop.prev_named_sibling
    while prev is not None and prev.type == "comment":
        prev = prev.prev_named_sibling
    if prev is None or prev.type != "expression_statement" or not within(prev, outer):
        return False
    a = prev.named_children[0] if prev.named_children else None
    return a is not None and a.type == "assignment_expression" and \
        a.child_by_field_name("operator").type == "=" and \
        _same_var(a.child_by_field_name("left"), key)


def _once(s: Source, m) -> str | None:
    for loop in walk(m.fn):
        if loop.type != "while_statement" or _jumps(loop):
            continue
        body = loop.child_by_field_name("body")
        ind = s.indent_of(loop)
        got = _pointer_trip(s, loop)
        if got is not None:
            name, trip = got
            n, k = fresh_name(m, f"{name}_trip"), fresh_name(m, f"{name}_k")
            text = (f"const long long {n} = {trip};\n{ind}"
                    f"for (long long {k} = 0; {k} < {n}; ++{k}) {s.text_of(body)}")
            return finish(s, [Edit(loop.start_byte, loop.end_byte, text)])
        got2 = _count_trip(s, m.fn, loop)
        if got2 is not None:
            name, ty, trip = got2
            k = fresh_name(m, f"{name}_k")
            text = f"for ({ty} {k} = 0; {k} < {trip}; ++{k}) {s.text_of(body)}"
            return finish(s, [Edit(loop.start_byte, loop.end_byte, text)])
        got3 = _decrement_trip(s, m.fn, loop)
        if got3 is not None:
            name, ty, step = got3
            k = fresh_name(m, f"{name}_k")
            inner = s.data[body.start_byte:step.start_byte].decode() + \
                s.data[step.end_byte:body.end_byte].decode()
            text = f"for ({ty} {k} = 0; {k} < {name}; ++{k}) {inner}"
            return finish(s, [Edit(loop.start_byte, loop.end_byte, text)])
    return None


def counted_whiles(src: str, entry: str) -> str | None:
    """The counted `while` loops of `entry` written as `for` loops (module docstring);
    None when there are none."""
    return repeat(src, entry, _once)
