"""Loop counters declared at the top of a function, declared in their loops instead.

C written before C99, and much written since, declares every counter once at the top
and assigns it in each loop:

    int i, j, k;
    for (i = 0; i < filters; ++i)
        for (j = 0; j < batch; ++j) ...

To the dependence analysis `j` is then a variable of the whole function that every
iteration of the `i` loop writes: a loop-carried dependence, so nothing is threaded or
jammed. When the counter is a plain integer local, its address is never taken, and
every use of it lies inside a `for` whose initializer assigns it (so no value flows into
such a loop or out of it), declaring it in each of those loops changes nothing:

    int i, j, k;
    for (int i = 0; i < filters; ++i)
        for (int j = 0; j < batch; ++j) ...

The declarations at the top stay (unused now); the loops' own ones shadow them.
"""

from __future__ import annotations

from collections.abc import Iterator

from kernelcrew.agents.transforms.analysis.common import finish
from kernelcrew.csource.syntax import (
    Edit,
    Node,
    Source,
    declarators,
    find_function,
    lookup,
    walk,
    within,
)

_INT_WORDS = {"int", "long", "short", "unsigned", "signed", "size_t", "ptrdiff_t",
              "int32_t", "int64_t", "uint32_t", "uint64_t", "ssize_t", "char"}


def _type_text(decl: Node) -> str | None:
    """The type of a plain integer declaration (`int`, `unsigned long`, `size_t`), or None
    for anything else (static, const, a struct, a typedef it cannot tell)."""
    typ = _plain_type(decl)
    return typ if typ is not None and all(w in _INT_WORDS for w in typ.split()) else None


def _assigning_for(n: Node, name: str) -> Node | None:
    """The innermost `for` around `n` (or whose header holds it) whose initializer is the
    assignment `name = ...`."""
    p: Node | None = n
    while p is not None:
        if p.type == "for_statement":
            init = p.child_by_field_name("initializer")
            if init is not None and init.type == "assignment_expression" and \
                    init.child_by_field_name("operator").type == "=":
                left = init.child_by_field_name("left")
                if left is not None and left.type == "identifier" and left.text.decode() == name:
                    return p
        p = p.parent
    return None


def _top_locals(s: Source, entry: str, type_of) -> Iterator[tuple[Node, str, str, list[Node]]]:
    """(declaration, its type, name, the uses of that declaration) of each plain local
    `entry` declares without a value at the top level of a block (`int i, j;`, `float s;`
    at the top of the function, or `int ii, ie = ...;` at the top of a tile's body), for
    the declarations whose type `type_of` accepts."""
    fn = find_function(s, entry)
    body = fn.child_by_field_name("body") if fn is not None else None
    if body is None:
        return
    for block in walk(body):
        if block.type != "compound_statement":
            continue
        for decl in block.named_children:
            if decl.type != "declaration":
                continue
            typ = type_of(decl)
            if typ is None:
                continue
            for name, init, pointer, array in declarators(decl):
                if pointer or array or init is not None:
                    continue
                mine = [u for u in walk(block) if u.type == "identifier" and
                        u.text.decode() == name and not within(u, decl) and
                        (d := lookup(name, u)) is not None and
                        d.node.start_byte == decl.start_byte]
                if mine:
                    yield decl, typ, name, mine


def _address_taken(uses: list[Node]) -> bool:
    return any(u.parent is not None and u.parent.type == "pointer_expression" and
               u.parent.child_by_field_name("operator").type == "&" for u in uses)


def scope_counters(src: str, entry: str) -> str | None:
    """Declare the top-declared integer counters of `entry` in the loops that assign them,
    where that changes nothing (module docstring); None when there is none."""
    s = Source(src)
    edits: list[Edit] = []
    for _decl, typ, name, mine in _top_locals(s, entry, _type_text):
        if _address_taken(mine):
            continue  # its address is taken
        owners = [_assigning_for(u, name) for u in mine]
        if any(o is None for o in owners):
            continue  # read or written outside a loop that assigns it first
        if any(within(u, o.child_by_field_name("initializer").child_by_field_name("right"))
               for u, o in zip(mine, owners, strict=True) if o is not None):
            continue  # `for (i = i + 1; ...)` reads the value before the loop
        for o in {o.start_byte: o for o in owners if o is not None}.values():
            init = o.child_by_field_name("initializer")
            edits.append(Edit(init.start_byte, init.start_byte, f"{typ} "))
    return finish(s, edits)


def _plain_type(decl: Node) -> str | None:
    """The type of a declaration of plain locals (`float`, `float32_t`, `double`,
    `unsigned int`), None with a storage class, a qualifier or a struct."""
    words = []
    for c in decl.children:
        if c.type in ("primitive_type", "sized_type_specifier", "type_identifier"):
            words += c.text.decode().split()
        elif c.type in ("storage_class_specifier", "type_qualifier", "struct_specifier",
                        "union_specifier", "enum_specifier", "attribute_specifier",
                        "ms_declspec_modifier", "template_type", "qualified_identifier"):
            return None
    return " ".join(words) or None


def _first_set(u: Node, name: str) -> Node | None:
    """The loop body `u` starts each iteration of: the statement `name = value;` (a
    statement of a loop's body, its value not reading `name`) that `u` is, or None."""
    a = u.parent
    if a is None or a.type != "assignment_expression" or \
            a.child_by_field_name("operator").type != "=" or \
            a.child_by_field_name("left") != u:
        return None
    stmt = a.parent
    if stmt is None or stmt.type != "expression_statement" or stmt.parent is None or \
            stmt.parent.type != "compound_statement" or stmt.parent.parent is None or \
            stmt.parent.parent.type not in ("for_statement", "while_statement",
                                            "do_statement"):
        return None
    if any(n.type == "identifier" and n.text.decode() == name
           for n in walk(a.child_by_field_name("right"))):
        return None
    return stmt


def scope_scalars(src: str, entry: str) -> str | None:
    """Plain locals declared at the top that each loop using them sets first, declared
    where the loop sets them (`float sum;` ... `sum = 0.0f;` at the top of a row's body
    becomes `float sum = 0.0f;`): the loop then carries nothing in them and may be
    threaded. Taken where every use of the local lies in the body of a loop whose body
    starts it (a statement of that body, before every other use there), its address is
    never taken, and nothing outside those loops reads it; None where there is none."""
    s = Source(src)
    edits: list[Edit] = []
    for _decl, typ, name, mine in _top_locals(s, entry, _plain_type):
        if _address_taken(mine):
            continue
        starts: dict[int, Node] = {}  # loop body -> the statement that sets it first
        ok = True
        for u in sorted(mine, key=lambda x: x.start_byte):
            home = next((b for b, st in starts.items() if within(u, st.parent)
                         and b == st.parent.start_byte), None)
            if home is not None:
                if u.start_byte < starts[home].start_byte:
                    ok = False
                continue
            st = _first_set(u, name)
            if st is None:
                ok = False
                break
            starts[st.parent.start_byte] = st
        if not ok or not starts:
            continue
        # a loop's body set first must hold every use in that body after the set
        for st in starts.values():
            loop_body = st.parent
            if any(within(u, loop_body) and u.start_byte < st.start_byte for u in mine):
                ok = False
        if not ok:
            continue
        for st in starts.values():
            edits.append(Edit(st.start_byte, st.start_byte, f"{typ} "))
    return finish(s, edits)
