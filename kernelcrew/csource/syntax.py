"""A thin layer over tree-sitter-cpp: functions, parameters, loops, declarations, edits.

Every transformation parses the source, finds what it needs in the syntax tree and
rewrites byte ranges of the original text, so comments and formatting elsewhere are
kept. CUDA keywords the C++ grammar does not know (`__global__`, `__launch_bounds__(..)`)
are blanked to spaces of the same length before parsing, so byte offsets still match.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cache

import tree_sitter as ts
import tree_sitter_cpp

from kernelcrew.csource.masking import mask

Node = ts.Node

_CUDA_WORDS = re.compile(
    rb"\b(__global__|__device__|__host__|__forceinline__|__noinline__|__shared__|__constant__"
    rb"|__managed__)\b|\b__launch_bounds__\s*\((?:[^()]|\([^()]*\))*\)")


@cache
def _parser() -> ts.Parser:
    return ts.Parser(ts.Language(tree_sitter_cpp.language()))


class Source:
    """A parsed source text. Node positions are byte offsets into `data`."""

    def __init__(self, text: str):
        self.text = text
        self.data = text.encode()
        # what the grammar cannot read blanked, offsets kept: CUDA words, macros that
        # stand for qualifiers, #if fragments of a declaration or a statement (masking.py)
        masked = _CUDA_WORDS.sub(lambda m: b" " * (m.end() - m.start()),
                                 mask(text).text.encode())
        self.tree = _parser().parse(masked)
        self.root = self.tree.root_node

    def text_of(self, node: Node | None) -> str:
        if node is None:
            return ""
        return self.data[node.start_byte:node.end_byte].decode()

    def line_of(self, node: Node) -> int:
        """1-based line of a node in this text."""
        return node.start_point.row + 1

    def line_start(self, node: Node) -> int:
        return self.data.rfind(b"\n", 0, node.start_byte) + 1

    def indent_of(self, node: Node) -> str:
        start = self.line_start(node)
        line = self.data[start:node.start_byte].decode()
        return line if not line.strip() else re.match(r"\s*", line).group(0)

    def has_errors(self) -> bool:
        return self.root.has_error


class EditConflict(ValueError):
    """Two edits of one transformation overlap (a bug in that transformation)."""


@dataclass(frozen=True)
class Edit:
    start: int
    end: int
    text: str


def apply_edits(src: Source, edits: list[Edit]) -> str:
    """Splice edits into the source; edits must not overlap (insertions may share a point,
    and keep their list order)."""
    indexed = sorted(enumerate(edits), key=lambda ie: (ie[1].start, ie[1].end, ie[0]),
                     reverse=True)
    data = src.data
    last_start = len(data) + 1
    for _, e in indexed:
        if e.end > last_start:
            raise EditConflict(f"overlapping edits at byte {e.start}")
        data = data[:e.start] + e.text.encode() + data[e.end:]
        last_start = e.start
    return data.decode()


def walk(node: Node) -> Iterator[Node]:
    """All named descendants of a node, the node first, in source order."""
    stack = [node]
    while stack:
        n = stack.pop()
        yield n
        stack.extend(reversed(n.named_children))


def enclosed_by(n: Node, top: Node, types: tuple[str, ...] | frozenset[str]) -> bool:
    """Whether a node of one of `types` encloses `n` below `top` (`top` excluded): is
    this `continue` inside a loop of the branch, this call inside a loop of the function."""
    p = n.parent
    while p is not None and p != top:
        if p.type in types:
            return True
        p = p.parent
    return False


def unparen(n: Node) -> Node:
    """The expression inside any number of parentheses: `((x))` -> `x`."""
    while n.type == "parenthesized_expression" and len(n.named_children) == 1:
        n = n.named_children[0]
    return n


def within(inner: Node, outer: Node) -> bool:
    return outer.start_byte <= inner.start_byte and inner.end_byte <= outer.end_byte


def same(a: Node | None, b: Node | None) -> bool:
    return (a is not None and b is not None and a.start_byte == b.start_byte
            and a.end_byte == b.end_byte and a.type == b.type)


# ---------------------------------------------------------------- functions and parameters

def function_name(fn: Node) -> str | None:
    d = fn.child_by_field_name("declarator")
    while d is not None and d.type != "function_declarator":
        d = d.child_by_field_name("declarator")
    if d is None:
        return None
    name = d.child_by_field_name("declarator")
    return name.text.decode() if name is not None and name.type == "identifier" else None


def per_source(fn):
    """Memoize `fn(src)` on the Source (its text never changes): facts about the whole file
    (its functions, macros, helpers) that the moves ask for hundreds of times on one text.
    A copy of a set, dict or list is returned, so a caller may change its own."""
    key = f"_memo_{fn.__name__}"

    @functools.wraps(fn)
    def run(src: Source):
        if key not in src.__dict__:
            src.__dict__[key] = fn(src)
        got = src.__dict__[key]
        return got.copy() if isinstance(got, (set, dict, list)) else got

    return run


@per_source
def functions(src: Source) -> list[Node]:
    """The function definitions of the text, in source order (those at file, namespace,
    `extern "C"` or class scope; the walk does not enter a function's body)."""
    found, stack = [], [src.root]
    while stack:
        n = stack.pop()
        if n.type == "function_definition":
            found.append(n)
            continue
        stack.extend(reversed(n.named_children))
    return found


def find_function(src: Source, name: str) -> Node | None:
    for fn in functions(src):
        if function_name(fn) == name:
            return fn
    return None


def function_params(fn: Node) -> Node | None:
    d = fn.child_by_field_name("declarator")
    while d is not None and d.type != "function_declarator":
        d = d.child_by_field_name("declarator")
    return d.child_by_field_name("parameters") if d is not None else None


@dataclass
class Param:
    name: str
    node: Node  # parameter_declaration
    # the pointer_declarator when the parameter is a pointer; for an array parameter
    # (`float a[N][M]`, a pointer to rows) its array_declarator
    pointer: Node | None
    const: bool  # `const T*`: the pointee is read-only
    restrict: bool
    array: bool = False


def params(fn: Node) -> list[Param]:
    plist = function_params(fn)
    out: list[Param] = []
    if plist is None:
        return out
    for p in plist.named_children:
        if p.type != "parameter_declaration":
            continue
        d = p.child_by_field_name("declarator")
        ptr = None
        restrict = False
        array = False
        while d is not None and d.type in ("pointer_declarator", "reference_declarator",
                                           "array_declarator"):
            if d.type == "pointer_declarator":
                ptr = ptr or d
                restrict = restrict or any(
                    c.type == "type_qualifier" and c.text.decode() in ("__restrict__", "restrict",
                                                                       "__restrict")
                    for c in d.children)
            elif d.type == "array_declarator":
                if ptr is not None:
                    break  # an array of pointers: not a buffer of elements
                ptr, array = d, True
                d = d.child_by_field_name("declarator")
                while d is not None and d.type == "array_declarator":
                    d = d.child_by_field_name("declarator")
                break
            d = d.child_by_field_name("declarator") or (
                d.named_children[-1] if d.named_children else None)
        if d is None or d.type != "identifier":
            continue
        const = any(c.type == "type_qualifier" and c.text.decode() == "const"
                    for c in p.children if c.end_byte <= (ptr.start_byte if ptr else p.end_byte))
        out.append(Param(d.text.decode(), p, ptr, const, restrict, array))
    return out


# ---------------------------------------------------------------- declarations

@dataclass
class Decl:
    name: str
    node: Node  # the declaration (or parameter_declaration)
    init: Node | None  # initializer expression
    pointer: bool
    const: bool
    param: bool = False
    array: bool = False

    @property
    def key(self) -> str:
        return f"{self.name}@{self.node.start_byte}"


def declarators(decl: Node) -> Iterator[tuple[str, Node | None, bool, bool]]:
    """(name, init, is_pointer, is_array) of each declarator of a declaration."""
    for d in decl.children_by_field_name("declarator"):
        init = None
        if d.type == "init_declarator":
            init = d.child_by_field_name("value")
            d = d.child_by_field_name("declarator")
        pointer = array = False
        while d is not None and d.type in ("pointer_declarator", "reference_declarator",
                                           "array_declarator", "parenthesized_declarator"):
            pointer = pointer or d.type == "pointer_declarator"
            array = array or d.type == "array_declarator"
            d = d.child_by_field_name("declarator") or (
                d.named_children[0] if d.named_children else None)
        if d is not None and d.type == "identifier":
            if init is not None and init.type == "initializer_list":
                init = None
            yield d.text.decode(), init, pointer, array


def _is_const(decl: Node) -> bool:
    return any(c.type == "type_qualifier" and c.text.decode() == "const" for c in decl.children)


def array_dims(decl: Node, name: str) -> list[Node | None] | None:
    """The size expressions of `name`'s array dimensions in its declaration, the first
    dimension first (None for an empty `[]`); None when it is not declared as an array
    (`float a[N][M]` -> [N, M]; a parameter's first dimension is only its decay)."""
    for n in walk(decl):
        if n.type != "array_declarator":
            continue
        if n.parent is not None and n.parent.type == "array_declarator":
            continue  # an inner level: taken from the outermost one
        sizes: list[Node | None] = []
        d = n
        while d is not None and d.type == "array_declarator":
            sizes.append(d.child_by_field_name("size"))
            d = d.child_by_field_name("declarator")
        if d is not None and d.type == "identifier" and d.text.decode() == name:
            return sizes[::-1]
    return None


def lookup(name: str, at: Node) -> Decl | None:
    """The declaration of `name` visible at node `at` (block scoping, for-init, parameters)."""
    n = at
    while n is not None:
        p = n.parent
        if p is None:
            return None
        if p.type in ("compound_statement", "translation_unit", "declaration_list"):
            for c in p.named_children:
                if c.start_byte >= n.start_byte:
                    break
                if c.type == "declaration":
                    for nm, init, ptr, arr in declarators(c):
                        if nm == name:
                            return Decl(nm, c, init, ptr, _is_const(c), array=arr)
        elif p.type == "for_statement":
            init = p.child_by_field_name("initializer")
            if init is not None and init.type == "declaration" and not same(init, n):
                for nm, val, ptr, arr in declarators(init):
                    if nm == name:
                        return Decl(nm, init, val, ptr, _is_const(init), array=arr)
        elif p.type == "function_definition":
            for prm in params(p):
                if prm.name == name:
                    return Decl(name, prm.node, None, prm.pointer is not None, prm.const,
                                param=True, array=prm.array)
        n = p
    return None


# ---------------------------------------------------------------- loops

@dataclass
class Loop:
    node: Node  # for_statement
    var: str | None
    decl: Node | None  # where the induction variable is declared (for-init or outside)
    start: Node | None
    end: Node | None  # the bound expression
    inclusive: bool  # `<=` rather than `<`
    step: Node | None  # None: ++i / i++ / i += 1
    body: Node
    parent: Loop | None = None
    children: list[Loop] = field(default_factory=list)

    @property
    def key(self) -> str:
        """A unique symbol for the induction variable: `name@byte`."""
        owns_decl = self.decl is not None and self.decl.parent is not None and \
            self.decl.parent.start_byte == self.node.start_byte
        return f"{self.var}@{self.decl.start_byte if owns_decl else self.node.start_byte}"

    @property
    def canonical(self) -> bool:
        """i = start; i < end (or <=); ++i or i += step: countable, as OpenMP requires."""
        return self.var is not None and self.start is not None and self.end is not None

    def innermost(self) -> bool:
        return not self.children

    def depth(self) -> int:
        return 0 if self.parent is None else 1 + self.parent.depth()


def _loop_header(node: Node) -> tuple[str | None, Node | None, Node | None, Node | None, bool,
                                      Node | None]:
    """(var, decl, start, end, inclusive, step) of a for statement, Nones where unknown."""
    init = node.child_by_field_name("initializer")
    cond = node.child_by_field_name("condition")
    upd = node.child_by_field_name("update")
    var = start = decl = None
    if init is not None and init.type == "declaration":
        ds = list(declarators(init))
        if len(ds) == 1 and not ds[0][2]:
            var, start = ds[0][0], ds[0][1]
            decl = init
    elif init is not None and init.type == "assignment_expression":
        left = init.child_by_field_name("left")
        op = init.child_by_field_name("operator")
        if left is not None and left.type == "identifier" and op is not None and op.type == "=":
            var, start = left.text.decode(), init.child_by_field_name("right")
            d = lookup(var, node)
            decl = d.node if d is not None else None
    if var is None:
        return None, None, None, None, False, None
    end = None
    inclusive = False
    if cond is not None and cond.type == "binary_expression":
        op = cond.child_by_field_name("operator").type
        left, right = cond.child_by_field_name("left"), cond.child_by_field_name("right")
        if op in ("<", "<=") and left.type == "identifier" and left.text.decode() == var:
            end, inclusive = right, op == "<="
    step: Node | None = None
    ok_step = False
    if upd is not None:
        if upd.type == "update_expression":
            arg = upd.child_by_field_name("argument")
            ok_step = (arg is not None and arg.text.decode() == var and "++" in upd.text.decode())
        elif upd.type == "assignment_expression":
            left, right = upd.child_by_field_name("left"), upd.child_by_field_name("right")
            op = upd.child_by_field_name("operator").type
            if left.type == "identifier" and left.text.decode() == var and op == "+=":
                ok_step = True
                step = None if right.text.decode() in ("1", "1L", "1LL") else right
    if not ok_step:
        end = None
    return var, decl, start, end, inclusive, step


def loops_in(node: Node, parent: Loop | None = None) -> list[Loop]:
    """The loop forest under `node`: for statements and their nesting."""
    out: list[Loop] = []

    def visit(n: Node, par: Loop | None, only: Node | None = None) -> None:
        for c in n.named_children if only is None else [only]:
            if c.type == "for_statement":
                var, decl, start, end, incl, step = _loop_header(c)
                lp = Loop(c, var, decl, start, end, incl, step, c.child_by_field_name("body"),
                          par)
                if par is None:
                    out.append(lp)
                else:
                    par.children.append(lp)
                if lp.body is not None and lp.body.type == "for_statement":
                    visit(c, lp, only=lp.body)  # `for (..) for (..) {..}`: no braces between
                else:
                    visit(lp.body, lp)
            elif c.type in ("lambda_expression", "function_definition"):
                continue
            else:
                visit(c, par)

    visit(node, parent)
    return out


def all_loops(forest: list[Loop]) -> list[Loop]:
    out = []
    for lp in forest:
        out.append(lp)
        out.extend(all_loops(lp.children))
    return out


# pragmas no compiler reads, which mark a region for a tool: a polyhedral extractor's
# `scop`/`endscop`, an editor's `region`/`endregion` and `mark`. They annotate no statement.
MARKER_PRAGMAS = frozenset({"scop", "endscop", "region", "endregion", "mark"})


def pragmas_before(stmt: Node) -> list[Node]:
    """`#pragma` lines directly before a statement (its siblings, nearest last); marker
    pragmas (MARKER_PRAGMAS) are passed over: they annotate nothing."""
    out = []
    p = stmt.prev_named_sibling
    while p is not None and p.type == "preproc_call":
        directive = p.child_by_field_name("directive")
        if directive is None or directive.text.decode() != "#pragma":
            break
        arg = p.child_by_field_name("argument")
        words = arg.text.decode().split() if arg is not None else []
        if not (words and words[0] in MARKER_PRAGMAS):
            out.append(p)
        p = p.prev_named_sibling
    return list(reversed(out))


def lead_start(src: Source, stmt: Node) -> int:
    """Where the lines of a statement begin, its attached `#pragma` lines included: a
    rewrite that wraps or copies the statement takes them along (a pragma must directly
    precede the loop it annotates)."""
    prag = pragmas_before(stmt)
    return src.line_start(prag[0] if prag else stmt)


def pragma_text(src: Source, node: Node) -> str:
    arg = node.child_by_field_name("argument")
    return src.text_of(arg).strip() if arg is not None else ""


def insert_lines_before(src: Source, stmt: Node, lines: list[str]) -> list[Edit]:
    """Edits that put whole lines (e.g. pragmas) right before a statement. A statement that is
    the unbraced body of a loop or if gets braces, so the pragma stays attached to it."""
    block = "".join(f"{ln}\n" for ln in lines)
    parent = stmt.parent
    if parent is not None and parent.type not in ("compound_statement", "translation_unit"):
        ind = src.indent_of(stmt)
        return [Edit(stmt.start_byte, stmt.start_byte, "{\n" + block + ind),
                Edit(stmt.end_byte, stmt.end_byte, "\n" + ind + "}")]
    start = src.line_start(stmt)
    if src.data[start:stmt.start_byte].strip():
        # something else precedes the statement on its line
        return [Edit(stmt.start_byte, stmt.start_byte, "\n" + block + src.indent_of(stmt))]
    return [Edit(start, start, block)]


def remove_lines(src: Source, nodes: list[Node]) -> list[Edit]:
    """Edits that delete whole lines holding the nodes (used for pragmas)."""
    edits = []
    for n in nodes:
        start = src.line_start(n)
        end = n.end_byte
        if end > 0 and src.data[end - 1:end] != b"\n":
            nl = src.data.find(b"\n", end)
            end = len(src.data) if nl < 0 else nl + 1
        edits.append(Edit(start, end, ""))
    return edits


def uncast(n: Node | None) -> Node | None:
    """The expression inside parentheses and casts: `((int)(x))` -> `x`; None where a
    parenthesis holds more than one expression."""
    while n is not None and n.type in ("parenthesized_expression", "cast_expression"):
        n = n.child_by_field_name("value") if n.type == "cast_expression" else \
            (n.named_children[0] if len(n.named_children) == 1 else None)
    return n


def subscript_index(sub: Node) -> Node | None:
    """The index expression of `a[i]` (tree-sitter-cpp wraps it in an argument list),
    None for `a[i, j]` or no index."""
    idx = sub.child_by_field_name("indices") or sub.child_by_field_name("index")
    if idx is None:
        return None
    if idx.type == "subscript_argument_list":
        return idx.named_children[0] if len(idx.named_children) == 1 else None
    return idx


def identifiers(node: Node, name: str | None = None) -> Iterator[Node]:
    for n in walk(node):
        if n.type == "identifier" and (name is None or n.text.decode() == name):
            yield n
