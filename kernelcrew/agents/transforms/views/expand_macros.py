"""Macros expanded in the functions of the file, as the preprocessor would.

C code reaches its arrays through indexing macros (`#define U(i, j) u[(i) * nx + (j)]`,
`V(i, j) = c0 * U(i, j) + ...`). A macro invocation looks like a call to the analysis, so a
write through one cannot be proven to touch one element, and a read through one names no
array at all. Expanded (the macro's replacement text with the arguments put in for its
parameters, token for token, no parentheses added; a parenthesized parameter whose argument is
a variable or a number loses its parentheses, which mean nothing there and would make
`(x) + n` read as a cast), the subscripts are plain again. The definitions stay; the
uses in every function's body are replaced (imported code keeps its work in the code base's
own function, which the generated entry calls), and so are object-like macros that stand
for a function-like macro's invocation or for a variable in scope (a loop bound
`_PB_N` defined as `POLYBENCH_LOOP_BOUND(N, n)` or as `n`). Macros whose body stringizes or
pastes tokens (`#`, `##`), takes a variable number of arguments or holds string literals
are left alone.

Parameters declared through macros are expanded too, in every function of the file: a code
base that writes `DATA_TYPE POLYBENCH_2D(data, N, M, n, m)` for `double data[N][M]` shows a
declarator the parser reads as a function, so the array and its row length are unknown to
the analysis. The macro invocations in such a declaration are expanded (repeatedly, a
macro's body may invoke another), object-like macros that are empty or 0 in the result are
dropped (`POLYBENCH_RESTRICT`, `+ POLYBENCH_PADDING_FACTOR`), and the declaration reads
`DATA_TYPE data[N][M]`.
"""

from __future__ import annotations

import re

from kernelcrew.agents.transforms.analysis.common import finish
from kernelcrew.csource.syntax import Edit, Source, apply_edits, find_function, lookup, walk
from kernelcrew.kernels.text import split_top


def _definitions(s: Source) -> dict[str, tuple[list[str], str]]:
    out: dict[str, tuple[list[str], str]] = {}
    for n in walk(s.root):
        if n.type != "preproc_function_def":
            continue
        name, body = n.child_by_field_name("name"), n.child_by_field_name("value")
        ps = n.child_by_field_name("parameters")
        if name is None or ps is None:
            continue
        text = s.text_of(body).strip() if body is not None else ""
        args = [c.text.decode() for c in ps.named_children]
        if "#" in text or '"' in text or "'" in text or "..." in s.text_of(ps) or \
                any(not re.fullmatch(r"[A-Za-z_]\w*", a) for a in args):
            continue
        out[name.text.decode()] = (args, text)
    return out


def _arguments(text: str) -> list[str]:
    """The arguments of `(a, b[i, j], (T)c)` as the preprocessor splits them: at the commas
    outside parentheses and brackets (a type name such as `float` is an argument too,
    though it is no expression)."""
    inner = text.strip()[1:-1]
    return [a.strip() for a in split_top(inner)] if inner.strip() else []


def _plain(params: list[str], args: list[str], is_variable) -> set[str]:
    """The parameters whose argument is a number or a variable (`is_variable(name)`): their
    parentheses in the body mean nothing and are dropped (see the module)."""
    return {p for p, a in zip(params, args, strict=True)
            if re.fullmatch(r"\s*\d[\w.]*\s*", a)
            or (re.fullmatch(r"\s*[A-Za-z_]\w*\s*", a) and is_variable(a.strip()))}


_CAST = re.compile(r"\(\s*(const\s+)?((un)?signed\s+)?(size_t|ptrdiff_t|u?int\d+_t|char|short|"
                   r"int|long|long\s+long|float|double)(\s+int)?\s*\**\s*\)$")


def _substitute(params: list[str], args: list[str], body: str, plain: set[str]) -> str:
    """The macro's body with the arguments put in for its parameters, token for token;
    `(p)` is written without its parentheses where p's argument is plain (see the module)."""
    table = dict(zip(params, args, strict=True))

    def bare(m: re.Match) -> str:
        # a call's argument list keeps its parentheses: `sqrt(x)` is not `sqrtx`, nor is
        # `(*f)(x)` `(*f)x`; after a cast to a built-in type, `(size_t)(r)`, they go
        before = body[:m.start()].rstrip()
        if m.group(1) not in plain:
            return m.group(0)
        if before and (before[-1].isalnum() or before[-1] in "_]"):
            return m.group(0)
        if before.endswith(")") and not _CAST.search(before):
            return m.group(0)
        return m.group(1)

    if plain:
        body = re.sub(r"\(\s*([A-Za-z_]\w*)\s*\)", bare, body)
    return re.sub(r"\b[A-Za-z_]\w*\b", lambda m, tb=table: tb.get(m.group(0), m.group(0)),
                  body) if table else body


def _objects(s: Source) -> dict[str, str]:
    """Object-like macros of the file: name -> replacement text ('' where empty)."""
    out: dict[str, str] = {}
    for n in walk(s.root):
        if n.type == "preproc_def" and (name := n.child_by_field_name("name")) is not None:
            value = n.child_by_field_name("value")
            out[name.text.decode()] = s.text_of(value).strip() if value is not None else ""
    return out


def _close(text: str, open_at: int) -> int | None:
    """The index of the parenthesis closing the one at `open_at`."""
    depth = 0
    for k in range(open_at, len(text)):
        depth += {"(": 1, ")": -1}.get(text[k], 0)
        if depth == 0:
            return k
    return None


def _expand_declaration(text: str, defs: dict[str, tuple[list[str], str]],
                        objects: dict[str, str], limit: int = 8) -> str | None:
    """A parameter declaration with its macro invocations expanded; None where one cannot
    be (a wrong argument count, unbalanced parentheses) or there is none."""
    call = re.compile(r"\b(" + "|".join(map(re.escape, defs)) + r")\s*\(")
    changed = False
    for _ in range(limit):
        m = call.search(text)
        if m is None:
            break
        end = _close(text, m.end() - 1)
        if end is None:
            return None
        params, body = defs[m.group(1)]
        args = _arguments(text[m.end() - 1:end + 1])
        if len(args) != len(params):
            return None
        # in a declaration every name is an extent (a macro or a parameter): all plain
        plain = _plain(params, args, lambda name: True)
        text = text[:m.start()] + _substitute(params, args, body, plain) + text[end + 1:]
        changed = True
    if not changed or call.search(text):
        return None
    dropped = {k for k, v in objects.items() if v in ("", "0")}
    text = re.sub(r"\b[A-Za-z_]\w*\b",
                  lambda t: "" if t.group(0) in dropped and objects[t.group(0)] == "" else
                  ("0" if t.group(0) in dropped else t.group(0)), text)
    text = re.sub(r"\s*\+\s*0\s*\]", "]", text)  # `N + 0]`: the padding of nothing
    return re.sub(r"\[\s+", "[", text)


def _expanded_declarations(s: Source) -> list[tuple[object, str]]:
    """(node, expansion) for each parameter declaration of `s` written through a
    function-like macro that the view expands."""
    defs = _definitions(s)
    if not defs:
        return []
    objects = _objects(s)
    out = []
    for n in walk(s.root):
        if n.type != "parameter_declaration":
            continue
        text = s.text_of(n)
        if any(re.search(rf"\b{re.escape(d)}\s*\(", text) for d in defs):
            new = _expand_declaration(text, defs, objects)
            if new is not None and new != text:
                out.append((n, new))
    return out


def _declarators(src: str) -> str | None:
    """The source with every parameter declared through a function-like macro expanded."""
    s = Source(src)
    return finish(s, [Edit(n.start_byte, n.end_byte, new)
                      for n, new in _expanded_declarations(s)])


def _alias(value: str, defs: dict[str, tuple[list[str], str]], at) -> bool:
    """An object-like macro that stands for a function-like macro's invocation
    (`#define _B_N BOUND(N, n)`) or for a variable in scope where it is used
    (`#define _B_N n`): a loop bound written through it is that expression."""
    m = re.fullmatch(r"([A-Za-z_]\w*)\s*\(.*\)", value, re.DOTALL)
    if m is not None:
        return m.group(1) in defs
    return re.fullmatch(r"[A-Za-z_]\w*", value) is not None and lookup(value, at) is not None


def declarator_spellings(src: str) -> dict[str, str]:
    """Each parameter declaration of `src` written through a macro: its expansion (as the
    view writes it) -> its text as written."""
    s = Source(src)
    return {new: s.text_of(n) for n, new in _expanded_declarations(s)}


def restore_declarators(original: str, result: str | None) -> str | None:
    """`result` (a move applied to a view of `original`) with the parameter declarations
    the view expanded written as `original` has them: the same declarations to the
    compiler, and the interface as the code base spells it (a patch back to it keeps it)."""
    if result is None:
        return None
    table = declarator_spellings(original)
    if not table:
        return result
    s = Source(result)
    edits = [Edit(n.start_byte, n.end_byte, table[s.text_of(n)]) for n in walk(s.root)
             if n.type == "parameter_declaration" and s.text_of(n) in table]
    return apply_edits(s, edits) if edits else result


def _once(src: str, entry: str) -> str | None:
    s = Source(src)
    defs = _definitions(s)
    objects = {k: v for k, v in _objects(s).items() if k not in defs and v}
    if find_function(s, entry) is None or not (defs or objects):
        return None
    edits: list[Edit] = []
    # every function of the file: imported code keeps its work in the code base's own
    # function, which the generated entry calls
    for fn in (n for n in walk(s.root) if n.type == "function_definition"):
        body_node = fn.child_by_field_name("body")
        if body_node is not None:
            _expand_uses(s, body_node, defs, objects, edits)
    return finish(s, edits)


def _expand_uses(s: Source, root, defs: dict[str, tuple[list[str], str]],
                 objects: dict[str, str], edits: list[Edit]) -> None:
    for n in walk(root):
        if any(e.start <= n.start_byte < e.end for e in edits):
            continue  # inside a macro use already expanded in this pass
        if n.type == "identifier" and (v := objects.get(n.text.decode())) is not None:
            parent = n.parent
            called = parent is not None and parent.type == "call_expression" and \
                parent.child_by_field_name("function") == n
            if not called and _alias(v, defs, n):
                edits.append(Edit(n.start_byte, n.end_byte, v))
            continue
        if n.type != "call_expression":
            continue
        f = n.child_by_field_name("function")
        name = s.text_of(f).strip()
        if f.type != "identifier" or name not in defs:
            continue
        params, body = defs[name]
        args = _arguments(s.text_of(n.child_by_field_name("arguments")))
        if len(args) != len(params):
            continue
        # `(p)` with a variable or a number for p is written without the parentheses:
        # `((x) + (size_t)(r) * (n))` would read as a cast of `+ ...` to the type `x`
        plain = _plain(params, args, lambda name, at=n: lookup(name, at) is not None)
        edits.append(Edit(n.start_byte, n.end_byte, _substitute(params, args, body, plain)))


def expand_macros(src: str, entry: str, limit: int = 4) -> str | None:
    """The source with the parameters declared through macros and the function-like macro
    invocations in `entry` expanded; None when there are none."""
    out = _declarators(src)
    for _ in range(limit):
        new = _once(out if out is not None else src, entry)
        if new is None:
            break
        out = new
    return out
