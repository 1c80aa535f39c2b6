"""Helpers the loop transformations share: parsing a function, finishing edits, pragmas,
versioned small-size paths, fresh names."""

from __future__ import annotations

import re

from kernelcrew.csource.affine import FunctionModel, int_literal
from kernelcrew.csource.syntax import (
    Edit,
    Loop,
    Node,
    Source,
    apply_edits,
    find_function,
    identifiers,
    lookup,
    pragma_text,
    pragmas_before,
    walk,
    within,
)

MIN_INNER = 8  # below this inner trip count an interchanged (vectorized) loop does not pay
# First line of the original code that a transformation keeps for sizes where its rewrite
# does not pay (the interchange's short rows); later transformations (simd, unroll,
# interchange, tiling) leave such a block alone: their set-up costs more than it saves.
SMALL_MARK = "// kernelcrew: small-size path, kept simple"
_HINTS = re.compile(r"^\s*#\s*pragma\s+(omp\s+simd\b|GCC\s+unroll\b|unroll\b)")


_REDUCED = re.compile(r"\breduction\s*\(\s*[^:()]+:\s*([^)]*)\)")


def reduction_clauses(reductions: dict[str, str], pragmas: list[str] = ()) -> str:
    """` reduction(op : a, b)` clauses for `reductions` (var -> op), leaving out the
    variables that a reduction clause of `pragmas` already names (OpenMP refuses a variable
    in two reduction clauses of one construct)."""
    named = {x.strip() for text in pragmas for grp in _REDUCED.findall(text)
             for x in grp.split(",")}
    by_op: dict[str, list[str]] = {}
    for name, op in reductions.items():
        if name not in named:
            by_op.setdefault(op, []).append(name)
    return "".join(f" reduction({op} : {', '.join(ns)})" for op, ns in sorted(by_op.items()))


def in_small_path(node: Node) -> bool:
    """Inside a block that starts with SMALL_MARK."""
    return in_marked_block(node, SMALL_MARK)


def in_marked_block(node: Node, mark: str) -> bool:
    """Inside a block whose first child is the comment `mark`."""
    p = node.parent
    while p is not None:
        if p.type == "compound_statement":
            first = p.named_children[0] if p.named_children else None
            if first is not None and first.type == "comment" and \
                    first.text.decode().strip() == mark:
                return True
        p = p.parent
    return False


def strip_hints(text: str) -> str:
    """Drop simd/unroll pragma lines (hints only: the loops mean the same without them)."""
    return "\n".join(ln for ln in text.split("\n") if not _HINTS.match(ln))


def model_of(src: str, entry: str) -> tuple[Source, FunctionModel] | None:
    s = Source(src)
    fn = find_function(s, entry)
    if fn is None or fn.child_by_field_name("body") is None:
        return None
    return s, FunctionModel(s, fn)


def innermost_reasons(src: str, entry: str, plan) -> list[str]:
    """Why each innermost loop of `entry` is not a site of a move: the strings that
    `plan(model, loop)` returns (anything else is a site)."""
    got = model_of(src, entry)
    if got is None:
        return []
    _, m = got
    return [r for lp in m.loops if not lp.children if isinstance(r := plan(m, lp), str)]


def finish(s: Source, edits: list[Edit]) -> str | None:
    if not edits:
        return None
    out = apply_edits(s, edits)
    if out == s.text or Source(out).has_errors() and not s.has_errors():
        return None
    return out


def has_pragma(s: Source, lp: Loop, word: str) -> bool:
    return any(re.search(word, pragma_text(s, p)) for p in pragmas_before(lp.node))


def collapsed(s: Source, lp: Loop) -> bool:
    """`lp` belongs to the nest of an enclosing `collapse(N)` loop: nothing may go between."""
    depth, cur = 1, lp.parent
    while cur is not None:
        for p in pragmas_before(cur.node):
            m = re.search(r"\bcollapse\s*\(\s*(\d+)\s*\)", pragma_text(s, p))
            if m and int(m.group(1)) > depth:
                return True
        depth, cur = depth + 1, cur.parent
    return False


def invariant_text(s: Source, m: FunctionModel, node: Node | None, at: Node) -> str | None:
    """The text of a bound expression if every name in it is visible and fixed at `at`."""
    if node is None:
        return None
    for ident in identifiers(node):
        d = lookup(ident.text.decode(), ident)
        if d is None:
            continue  # a macro/knob
        if within(d.node, at) or m.is_written(d):
            return None
    return s.text_of(node).strip()


def fixed_text(s: Source, m: FunctionModel, node: Node | None, region: Node) -> str | None:
    """The text of an expression whose names nothing inside `region` declares or writes
    (an enclosing loop's counter included: it holds one value while `region` runs); None
    when one changes there or the expression has a call or a write."""
    if node is None:
        return None
    if any(n.type in ("call_expression", "assignment_expression", "update_expression")
           for n in walk(node)):
        return None
    changed = set()
    for n in walk(region):
        target = n.child_by_field_name("left") if n.type == "assignment_expression" else \
            n.child_by_field_name("argument") if n.type == "update_expression" else None
        if target is not None and target.type == "identifier":
            d = lookup(target.text.decode(), target)
            if d is not None:
                changed.add(d.key)
    for ident in identifiers(node):
        d = lookup(ident.text.decode(), ident)
        if d is not None and (within(d.node, region) or d.key in changed):
            return None
    return s.text_of(node).strip()


def constant_trip(s: Source, m: FunctionModel, lp: Loop) -> int | None:
    """The trip count of a unit-step loop whose bounds are integer constants: literals,
    object-like macros of a literal (`#define KSIZE 3`; not a knob, which a `#ifndef`
    guards and a tuner may change) and + - * of those (the bounds' affine forms, with
    the macros put in). None when it is not known."""
    if not lp.canonical or lp.step is not None:
        return None
    lo, hi = _constant(s, m, lp.start, lp.node), _constant(s, m, lp.end, lp.node)
    if lo is None or hi is None:
        return None
    return max(0, hi - lo + (1 if lp.inclusive else 0))


def short_constant_loop(s: Source, m: FunctionModel, lp: Loop) -> str | None:
    """Why a loop is best left to the compiler: it runs a constant number of times below
    MIN_INNER (a 3x3 filter's taps), which -O3 unrolls whole; a simd loop or split
    accumulators of it are mostly set-up and tail (None: it is not such a loop)."""
    t = constant_trip(s, m, lp)
    if t is None or t >= MIN_INNER:
        return None
    return (f"loop at line {s.line_of(lp.node)} runs a constant {t} time(s): the compiler "
            "unrolls it whole")


def _constant(s: Source, m: FunctionModel, node: Node | None, at: Node) -> int | None:
    poly = m.linear(node, at)
    if poly is None:
        return None
    total = 0
    for mono, coef in poly.items():
        for sym in mono:  # a name the code does not declare: a macro, maybe a constant one
            value = _macro_value(s, sym)
            if value is None:
                return None
            coef *= value
        total += coef
    return total


def _macro_value(s: Source, name: str) -> int | None:
    """The value of `#define NAME <integer>` when it is the file's only definition of NAME
    and no `#ifndef NAME` guards it (a knob)."""
    found = [n for n in walk(s.root) if n.type == "preproc_def" and
             (nm := n.child_by_field_name("name")) is not None and nm.text.decode() == name]
    if len(found) != 1 or found[0].parent is not None and \
            found[0].parent.type in ("preproc_ifdef", "preproc_if", "preproc_else",
                                     "preproc_elif"):
        return None
    value = found[0].child_by_field_name("value")
    return int_literal(s.text_of(value).strip().strip("()").strip()) if value is not None \
        else None


def descendants(lp: Loop) -> list[Loop]:
    out = []
    for c in lp.children:
        out.append(c)
        out.extend(descendants(c))
    return out


def guard_edit(s: Source, m: FunctionModel, knob: str, value: int) -> Edit:
    """`#ifndef KNOB / #define KNOB value / #endif` before the first function of the file
    (a helper defined before the entry may use the knob too)."""
    at = _file_scope_at(s, m)
    return Edit(at, at, f"#ifndef {knob}\n#define {knob} {value}\n#endif\n\n")


def include_edit(s: Source, m: FunctionModel, header: str) -> Edit:
    """`#include <header>` where guard_edit puts its knobs."""
    at = _file_scope_at(s, m)
    return Edit(at, at, f"#include <{header}>\n\n")


def _file_scope_at(s: Source, m: FunctionModel) -> int:
    """The start of the line of the file's first function, or of the namespace or linkage
    block that holds it: a place at file scope before any code that may use what goes
    there."""
    top = m.fn
    while top.parent is not None and top.parent.type != "translation_unit":
        top = top.parent
    for c in s.root.named_children:
        if c.start_byte >= top.start_byte:
            break
        if c.type in ("function_definition", "linkage_specification"):
            top = c
            break
    return s.line_start(top)


def helpers_at(s: Source, fn: Node) -> int:
    """Where definitions a rewrite of `fn` needs go: the start of the line of `fn`'s
    top-level declaration (its namespace or linkage block), before the comment that
    introduces it."""
    top = fn
    while top.parent is not None and top.parent.type != "translation_unit":
        top = top.parent
    at = top
    while at.prev_named_sibling is not None and at.prev_named_sibling.type == "comment" \
            and at.prev_named_sibling.end_point.row >= at.start_point.row - 1:
        at = at.prev_named_sibling
    return s.line_start(at)


def indented(text: str, by: str = "    ") -> str:
    """`by` more on every line but preprocessor lines (which stay at the margin) and blank
    ones."""
    return "\n".join(ln if ln.startswith("#") or not ln.strip() else by + ln
                     for ln in text.split("\n"))


AS_WAS_MARK = "// kernelcrew: the code as it was, where the test fails"


def versioned(ind: str, conds: list[str], fast: str, slow: str) -> str:
    """`if (conds) { fast } else { slow }` at indentation `ind`; `fast` and `slow` are
    statement texts at `ind` (their first line indented too), moved in by one level. The
    conditions are what a rewrite's legality rests on, tested at run time (`ldc >= N`);
    the slow block opens with AS_WAS_MARK, so the rewrite does not take it again
    (`in_as_was`)."""
    test = " && ".join(f"({c})" for c in conds)
    return (f"{ind}if ({test}) {{\n{indented(fast)}\n{ind}}} else {{\n{ind}    {AS_WAS_MARK}\n"
            f"{indented(slow)}\n{ind}}}")


def in_as_was(node: Node) -> bool:
    """Inside the slow block of `versioned`."""
    return in_marked_block(node, AS_WAS_MARK)


def mentions_var(m: FunctionModel, node: Node, lp: Loop) -> bool:
    for ident in identifiers(node, lp.var):
        d = lookup(lp.var, ident)
        if d is not None and lp.decl is not None and d.node.start_byte == lp.decl.start_byte:
            return True
    return False


def written_names(node: Node) -> set[str]:
    """The plain names assigned (`x = ..`, `x += ..`) or stepped (`x++`) inside `node`."""
    out = set()
    for n in walk(node):
        t = n.child_by_field_name("left") if n.type == "assignment_expression" else \
            n.child_by_field_name("argument") if n.type == "update_expression" else None
        if t is not None and t.type == "identifier":
            out.add(t.text.decode())
    return out


def statements(body: Node) -> list[Node]:
    if body.type == "compound_statement":
        return [c for c in body.named_children if c.type != "comment"]
    return [body]


def assignment(stmt: Node, op: str) -> tuple[Node, Node] | None:
    """`LEFT op RIGHT;` (op `=`, `+=`, ...) as an expression statement -> (LEFT, RIGHT)."""
    if stmt.type != "expression_statement" or not stmt.named_children:
        return None
    e = stmt.named_children[0]
    if e.type != "assignment_expression" or e.child_by_field_name("operator").type != op:
        return None
    return e.child_by_field_name("left"), e.child_by_field_name("right")


def product(node: Node) -> tuple[Node, Node] | None:
    """`X * Y` -> (X, Y)."""
    if node.type != "binary_expression" or node.child_by_field_name("operator").type != "*":
        return None
    return node.child_by_field_name("left"), node.child_by_field_name("right")


def loop_header(s: Source, lp: Loop) -> str:
    return s.data[lp.node.start_byte:lp.body.start_byte].decode().rstrip()


def fresh_name(m: FunctionModel, base: str) -> str:
    names = {n.text.decode() for n in walk(m.fn) if n.type == "identifier"}
    name, k = base, 2
    while name in names:
        name, k = f"{base}{k}", k + 1
    return name


def repeat(src: str, entry: str, once) -> str | None:
    """Apply a one-site rewrite until no site is left (versioned code has two copies)."""
    text, changed = src, False
    for _ in range(8):
        got = model_of(text, entry)
        if got is None:
            return None
        out = once(*got)
        if out is None:
            break
        text, changed = out, True
    return text if changed else None


def _code_only(text: str) -> str:
    """The text without its pragma lines and whitespace (two copies of a loop that differ
    only in their OpenMP pragmas compare equal)."""
    return "".join("".join(ln.split()) for ln in text.split("\n")
                   if not ln.lstrip().startswith("#"))


def serial_versions(s: Source, node: Node) -> list[tuple[int, int, str]]:
    """Inside `node`, each version test that picks between a threaded copy of some code
    and the same code on one thread (`if (WORK >= KNOB) { #pragma omp parallel for ... }
    else { ... }`, what omp_parallel writes): (start, end, replacement) byte ranges of the
    source, the replacement being the serial copy. Within a loop that is itself threaded
    the nested team would be one thread, and the test stands between the loop and the
    moves that read its body (a jam wants one inner loop, not two versions of it). The
    serial copy's statements replace the whole `if` (its lines) where they declare nothing
    at its top level, else its block does. Only a condition without calls or assignments,
    and two copies that differ in nothing but their pragmas, are taken."""
    out: list[tuple[int, int, str]] = []
    for n in walk(node):
        if n.type != "if_statement" or any(n.start_byte < e and n.end_byte > b
                                           for b, e, _ in out):
            continue
        then, alt = n.child_by_field_name("consequence"), n.child_by_field_name("alternative")
        if alt is not None and alt.type == "else_clause":
            alt = next((c for c in alt.named_children), None)
        if then is None or alt is None or then.type != "compound_statement" or \
                alt.type != "compound_statement":
            continue
        cond = n.child_by_field_name("condition")
        if any(c.type in ("call_expression", "assignment_expression", "update_expression")
               for c in walk(cond)):
            continue
        par = [pragma_text(s, p) for p in walk(then) if p.type == "preproc_call"]
        ser = [pragma_text(s, p) for p in walk(alt) if p.type == "preproc_call"]
        if not any(re.match(r"omp\s+parallel\b", t) for t in par) or \
                any(re.match(r"omp\s+(parallel|for)\b", t) for t in ser):
            continue
        if _code_only(s.text_of(then)) != _code_only(s.text_of(alt)):
            continue
        inner = [c for c in alt.named_children if c.type != "comment"]
        if any(c.type == "declaration" for c in inner) or not inner:
            out.append((n.start_byte, n.end_byte, s.text_of(alt)))
            continue
        body = s.data[s.line_start(inner[0]):inner[-1].end_byte].decode()
        body = "\n".join(ln[4:] if ln.startswith("    ") and not ln.lstrip().startswith("#")
                         else ln for ln in body.split("\n"))
        out.append((s.line_start(n), n.end_byte, body))
    return out
