"""Inline value-returning helpers called inside the entry's loops, so the loop moves see
the whole nest.

C code often puts the inner loop of a nest in a small function (`static float
column_total(const float* data, int rows, int cols, int col)`, `dot(a, b, n)`) that the
entry calls once per output. In place, the helper's loop is a 1-deep loop and the caller's
loop has a call in it: neither is a nest that interchange, unroll-and-jam or threads can
work on. Inlined, the caller's loop holds the helper's loop and the nest is visible:

    out[c] = column_total(x, (int)rows, (int)cols, c);
->
    float total_1 = 0.0f;
    for (int r_1 = 0; r_1 < ((int)rows); r_1++) {
        total_1 += x[r_1 * ((int)cols) + c];
    }
    out[c] = total_1;

A helper that returns early (`if (row < 0 || row >= height) return 0;` before its last
`return`, as pixel helpers test the padding) is inlined as the pure function it is: its
value becomes one conditional expression when the early returns follow the rest of its
statements,

    data_col[idx] = (row_1 < 0 || row_1 >= height) ? ((float)(0)) : ((float)(im[...]));

and otherwise a result local set on each path of nested `if`/`else` blocks (the
statements after an early return run in its `else`). Either way each path evaluates what
the helper evaluated on it, in its order, and nothing else: a read the helper guards stays
guarded.

Only what keeps the meaning: a helper defined in the file that writes nothing outside its
own locals (reads through its pointers only), is not recursive, ends with a `return`,
returns early only as `if (cond) return value;` at the top level of its body (no else, no
return nested deeper), has no static locals or labels, and uses no macro that names its
parameters or locals; a call in a statement of a loop body that has no other side effect
than its own assignment, not under `&&`, `||`, `?:` or in a loop header. Arguments that are
names, literals or casts of names replace the parameter (when the helper does not assign
it); others are evaluated once into a local, in argument order, before the body. The
helper's names get fresh ones, so nothing in the caller is shadowed.
"""

from __future__ import annotations

import re

from kernelcrew.agents.transforms.analysis.common import finish, written_names
from kernelcrew.agents.transforms.analysis.dependence import PURE_CALLS, impure_helpers, pure_macros
from kernelcrew.csource.syntax import (
    Edit,
    Node,
    Source,
    declarators,
    find_function,
    function_name,
    functions,
    lookup,
    params,
    pragma_text,
    walk,
)

_CONTROL = ("goto_statement", "labeled_statement", "throw_statement", "try_statement")


def _base_type(text: str) -> str:
    return " ".join(w for w in text.replace("*", " * ").split() if w not in ("const",
                                                                            "volatile"))


def _substitutable(s: Source, a: Node, p) -> bool:
    """The argument can stand for the parameter in the body: a name of exactly the
    parameter's type (pointers to the same type), or a cast to that type of a name.
    Anything else is converted once, into a local declared like the parameter."""
    want = p.node.child_by_field_name("type")
    if want is None:
        return False
    want_t = _base_type(s.text_of(want))
    ptr = p.pointer is not None
    n = a
    while n.type == "parenthesized_expression" and n.named_children:
        n = n.named_children[0]
    if n.type == "cast_expression":
        ty = n.child_by_field_name("type")
        inner = n.child_by_field_name("value")
        while inner is not None and inner.type == "parenthesized_expression":
            inner = inner.named_children[0] if inner.named_children else None
        return not ptr and ty is not None and _base_type(s.text_of(ty)) == want_t and \
            inner is not None and inner.type == "identifier"
    if n.type != "identifier":
        return False
    d = lookup(n.text.decode(), n)
    ty = d.node.child_by_field_name("type") if d is not None else None
    if d is None or ty is None or d.array or d.pointer != ptr:
        return False
    if ptr and s.text_of(d.node).split("=")[0].count("*") != s.text_of(p.node).count("*"):
        return False
    return _base_type(s.text_of(ty)) == want_t


def _enclosing_statement(call: Node, fn: Node) -> Node | None:
    """The statement of a loop body holding `call`, or None when the call is evaluated
    conditionally (&&, ||, ?:), in a loop header or in a nested statement."""
    p, child = call.parent, call
    while p is not None and p != fn:
        if p.type == "conditional_expression" and child != p.child_by_field_name("condition"):
            return None
        if p.type == "binary_expression" and p.child_by_field_name("operator").type in (
                "&&", "||") and child == p.child_by_field_name("right"):
            return None
        if p.type in ("comma_expression", "lambda_expression"):
            return None
        if p.type in ("expression_statement", "declaration"):
            holder = p.parent
            if holder is None or holder.type not in ("compound_statement", "for_statement"):
                return None
            if holder.type == "for_statement" and p != holder.child_by_field_name("body"):
                return None  # the loop's own initializer
            return p
        if p.type in ("for_statement", "while_statement", "do_statement", "if_statement",
                      "switch_statement", "return_statement"):
            return None
        p, child = p.parent, p
    return None


def _in_loop(n: Node, fn: Node) -> bool:
    p = n.parent
    while p is not None and p != fn:
        if p.type in ("for_statement", "while_statement", "do_statement"):
            return True
        p = p.parent
    return False


def _other_effects(s: Source, stmt: Node, call: Node, defined: set[str], macros: set[str]
                   ) -> bool:
    """The statement does something besides its top-level assignment and the call: a
    nested assignment or increment, a call that is not pure, another helper call."""
    top = stmt.named_children[0] if stmt.type == "expression_statement" and \
        stmt.named_children else None
    for n in walk(stmt):
        inside = call.start_byte <= n.start_byte and n.end_byte <= call.end_byte
        if inside:
            continue  # the arguments are evaluated once, before the body, as in the call
        if n.type in ("assignment_expression", "update_expression") and n != top:
            return True
        if n.type == "call_expression":
            name = s.text_of(n.child_by_field_name("function")).replace("std::", "").strip()
            if name in defined or (name not in PURE_CALLS and name not in macros):
                return True
    return False


def _early_return(st: Node) -> tuple[Node, Node] | None:
    """`if (cond) return value;` (or `{ return value; }`) without an else: (the
    condition, the value)."""
    if st.type != "if_statement" or st.child_by_field_name("alternative") is not None:
        return None
    cond, then = st.child_by_field_name("condition"), st.child_by_field_name("consequence")
    if cond is None or then is None:
        return None
    if then.type == "compound_statement":
        inner = [c for c in then.named_children if c.type != "comment"]
        if len(inner) != 1:
            return None
        then = inner[0]
    if then.type != "return_statement" or not then.named_children:
        return None
    expr = cond.named_children[-1] if cond.type == "condition_clause" else cond
    return expr, then.named_children[0]


def _helper_shape(s: Source, h: Node) -> tuple[list[Node], Node] | None:
    """(statements before the return, the returned expression) of an inlinable helper;
    the statements may include early returns, `if (cond) return value;` at the top level
    (`_early_return`)."""
    body = h.child_by_field_name("body")
    decl = h.child_by_field_name("declarator")
    if body is None or decl is None or decl.type != "function_declarator":
        return None  # returns a pointer or a reference: the declarator says so
    stmts = [c for c in body.named_children if c.type != "comment"]
    if not stmts or stmts[-1].type != "return_statement" or not stmts[-1].named_children:
        return None
    early = {r.start_byte for st in stmts[:-1] if _early_return(st) is not None
             for r in walk(st) if r.type == "return_statement"}
    name = function_name(h)
    for n in walk(body):
        if n.type == "return_statement" and n != stmts[-1] and n.start_byte not in early:
            return None
        if n.type in _CONTROL:
            return None
        if n.type == "declaration" and "static" in s.text_of(n).split("=")[0].split():
            return None
        if n.type == "call_expression" and s.text_of(n.child_by_field_name("function")) == name:
            return None  # recursive
        if n.type == "preproc_call" and re.match(r"omp\s+(parallel|for|task|critical)\b",
                                                 pragma_text(s, n)):
            return None
    return stmts[:-1], stmts[-1].named_children[0]


def _local_names(s: Source, h: Node) -> list[str] | None:
    """Parameters and locals of the helper; None when a name is declared twice (renaming
    by name would then mix two variables)."""
    names = [p.name for p in params(h)]
    for n in walk(h.child_by_field_name("body")):
        if n.type == "declaration":
            names += [nm for nm, *_ in declarators(n)]
    return None if len(names) != len(set(names)) else names


def _macro_bodies(s: Source) -> dict[str, str]:
    out = {}
    for n in walk(s.root):
        if n.type in ("preproc_def", "preproc_function_def"):
            name, value = n.child_by_field_name("name"), n.child_by_field_name("value")
            if name is not None:
                out[name.text.decode()] = s.text_of(value) if value is not None else ""
    return out


def _fresh(taken: set[str], base: str) -> str:
    k = 1
    while f"{base}_{k}" in taken:
        k += 1
    name = f"{base}_{k}"
    taken.add(name)
    return name


def _inline_one(s: Source, fn: Node) -> str | None:
    defs = {function_name(f): f for f in functions(s) if function_name(f)}
    impure = impure_helpers(s)
    macros = _macro_bodies(s)
    pure_m = pure_macros(s)
    taken = {n.text.decode() for n in walk(s.root) if n.type == "identifier"}
    entry = function_name(fn)
    for call in walk(fn):
        if call.type != "call_expression":
            continue
        callee = s.text_of(call.child_by_field_name("function")).strip()
        h = defs.get(callee)
        if h is None or callee == entry or callee in impure or not _in_loop(call, fn):
            continue
        stmt = _enclosing_statement(call, fn)
        if stmt is None or _other_effects(s, stmt, call, set(defs), pure_m):
            continue
        shape = _helper_shape(s, h)
        names = _local_names(s, h)
        ps = params(h)
        args = call.child_by_field_name("arguments").named_children
        if shape is None or names is None or len(ps) != len(args) or any(
                p.node.child_by_field_name("default_value") is not None for p in ps):
            continue
        if any(re.search(r"\[\s*\]|\(\s*\*", s.text_of(p.node)) for p in ps):
            continue  # array or function-pointer parameters
        body_nodes, ret = shape
        hbody = h.child_by_field_name("body")
        # a macro the helper uses must not name its parameters or locals
        words = set(names)
        used = {n.text.decode() for n in walk(hbody) if n.type == "identifier"}
        if any(set(re.findall(r"\w+", macros[u])) & words for u in used if u in macros):
            continue
        rename, setup = _bind_parameters(s, ps, args, hbody, taken)
        for nm in names[len(ps):]:
            rename[nm] = _fresh(taken, nm)

        ind = s.indent_of(stmt)
        rtype = s.text_of(h.child_by_field_name("type")).strip()
        lines = list(setup)
        value = _body_lines(s, body_nodes, ret, rename, rtype, hbody, lines, taken)
        new_stmt = (s.data[stmt.start_byte:call.start_byte] + value.encode()
                    + s.data[call.end_byte:stmt.end_byte]).decode()
        hoisted = "".join(
            "\n".join(ind + ln if not ln.startswith("#") else ln for ln in text.split("\n"))
            + "\n" for text in lines)
        if stmt.parent.type == "for_statement":  # a body without braces gets them
            outer = s.indent_of(stmt.parent)
            block = "{\n" + hoisted + ind + new_stmt + "\n" + outer + "}"
            return finish(s, [Edit(stmt.start_byte, stmt.end_byte, block)])
        start = s.line_start(stmt)
        if s.data[start:stmt.start_byte].strip():
            continue  # the statement shares its line with another
        return finish(s, [Edit(start, stmt.end_byte, hoisted + ind + new_stmt)])
    return None


def _statement_text(s: Source, st: Node, rename: dict[str, str]) -> str:
    """A helper statement's text with its names replaced, its own indentation taken off
    the lines after the first."""
    text = _renamed(s, st, rename)
    return "\n".join(ln if k == 0 or ln.startswith("#") else ln.removeprefix(s.indent_of(st))
                     for k, ln in enumerate(text.split("\n")))


_COMPARE = ("<", ">", "<=", ">=")


def _condition(s: Source, node: Node, rename: dict[str, str]) -> str:
    """A test's text with its names replaced and each comparison in parentheses, on one
    line: out of an `if`, `c < 0 || r >= h` reads to a C++ parser as a template argument
    list (`c<0 || r>`), and the moves would misread the statement."""
    def render(n: Node) -> str:
        if n.type == "identifier":
            return rename.get(n.text.decode(), n.text.decode())
        if not n.named_children:
            return s.text_of(n)
        out, at = b"", n.start_byte
        for c in n.children:
            out += s.data[at:c.start_byte] + render(c).encode()
            at = c.end_byte
        text = (out + s.data[at:n.end_byte]).decode()
        if n.type == "binary_expression" and \
                n.child_by_field_name("operator").type in _COMPARE and \
                (n.parent is None or n.parent.type != "parenthesized_expression"):
            text = f"({text})"
        return text
    return " ".join(render(node).split())


def _cast(s: Source, node: Node, text: str, rtype: str, hbody: Node) -> str:
    """The returned value converted to the helper's return type, as `return` does."""
    if node.type == "identifier" and _declared_type(s, hbody, node.text.decode()) == rtype:
        return text
    return f"(({rtype})({text}))"


def _body_lines(s: Source, body: list[Node], ret: Node, rename: dict[str, str], rtype: str,
                hbody: Node, lines: list[str], taken: set[str]) -> str:
    """Append the helper's statements (renamed) to `lines`; the value the call becomes.
    Early returns after the last other statement make one conditional expression; one
    before another statement makes a result local set on each path (`if (c) { r = v; }
    else { ...rest... }`)."""
    final = _cast(s, ret, _renamed(s, ret, rename), rtype, hbody)
    first = next((k for k, st in enumerate(body) if _early_return(st) is not None), None)
    if first is None:
        lines.extend(_statement_text(s, st, rename) for st in body)
        return final
    lines.extend(_statement_text(s, st, rename) for st in body[:first])
    rest = body[first:]
    if all(_early_return(st) is not None for st in rest):
        value = final
        for st in reversed(rest):
            cond, v = _early_return(st)
            value = (f"({_condition(s, cond, rename)}) ? "
                     f"{_cast(s, v, _renamed(s, v, rename), rtype, hbody)} : {value}")
        return f"({value})"
    result = _fresh(taken, "ret")
    text, closes = f"{rtype} {result};\n", 0
    for st in rest:
        got = _early_return(st)
        pad = "    " * closes
        if got is None:
            text += "\n".join(pad + ln for ln in _statement_text(s, st, rename).split("\n"))
            text += "\n"
            continue
        cond, v = got
        text += (f"{pad}if ({_condition(s, cond, rename)}) {{\n"
                 f"{pad}    {result} = "
                 f"{_cast(s, v, _renamed(s, v, rename), rtype, hbody)};\n{pad}}} else {{\n")
        closes += 1
    text += "    " * closes + f"{result} = {final};\n"
    for k in range(closes - 1, -1, -1):
        text += "    " * k + "}\n"
    lines.append(text.rstrip("\n"))
    return result


def _bind_parameters(s: Source, ps: list, args: list[Node], hbody: Node, taken: set[str]
                     ) -> tuple[dict[str, str], list[str]]:
    """How the helper's parameters are bound at the call: (name -> the argument's text
    where the helper never assigns the parameter and the argument can be substituted,
    else a fresh local; the declarations of those locals)."""
    assigned = written_names(hbody)
    rename: dict[str, str] = {}
    setup: list[str] = []
    for p, a in zip(ps, args, strict=True):
        if p.name not in assigned and _substitutable(s, a, p):
            text = s.text_of(a)
            rename[p.name] = text if a.type == "identifier" else f"({text})"
            continue
        new = _fresh(taken, p.name)
        rename[p.name] = new
        decl = s.text_of(p.node)
        ident = next(n for n in walk(p.node) if n.type == "identifier" and
                     n.text.decode() == p.name)
        at = ident.start_byte - p.node.start_byte
        decl_b = decl.encode()
        setup.append(decl_b[:at].decode() + new + decl_b[at + len(p.name.encode()):].decode()
                     + f" = {s.text_of(a)};")
    return rename, setup


def _renamed(s: Source, node: Node, rename: dict[str, str]) -> str:
    """The text of `node` with the names in `rename` replaced (in pragma clauses too)."""
    base = node.start_byte
    data = bytearray(s.data[node.start_byte:node.end_byte])
    spots = []
    for n in walk(node):
        if n.type == "identifier" and n.text.decode() in rename:
            spots.append((n.start_byte - base, n.end_byte - base,
                          rename[n.text.decode()]))
        elif n.type == "preproc_call":  # pragma clauses name variables too
            t = s.data[n.start_byte:n.end_byte].decode()
            t2 = re.sub(r"\b(" + "|".join(map(re.escape, rename)) + r")\b",
                        lambda mm: rename[mm.group(1)], t) if rename else t
            spots.append((n.start_byte - base, n.end_byte - base, t2))
    for a0, a1, txt in sorted(spots, reverse=True):
        data[a0:a1] = txt.encode()
    return data.decode()


def _declared_type(s: Source, body: Node, name: str) -> str | None:
    for n in walk(body):
        if n.type == "declaration" and any(nm == name and not ptr and not arr
                                           for nm, _, ptr, arr in declarators(n)):
            ty = n.child_by_field_name("type")
            return s.text_of(ty).strip() if ty is not None else None
    return None


def inline_calls(src: str, entry: str, limit: int = 8) -> str | None:
    """Inline the helper calls in the loops of `entry` that can be (see the module
    docstring); None when there is none."""
    out = None
    for _ in range(limit):
        s = Source(out if out is not None else src)
        fn = find_function(s, entry)
        if fn is None:
            break
        got = _inline_one(s, fn)
        if got is None:
            break
        out = got
    return out
