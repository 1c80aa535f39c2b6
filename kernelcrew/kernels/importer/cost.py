"""A cost model estimated from the code: loop trip counts from `for` headers, floating-point
operations counted in the loop bodies (helpers called from them included), bytes from the
tensors' shapes. The result is op.yaml's `cost` (expressions in the sizes) plus notes on
what could not be read (a loop bound in local variables counts as one trip)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from kernelcrew.csource.syntax import enclosed_by
from kernelcrew.errors import ExprError
from kernelcrew.kernels.expr import names_in, without_int_suffixes
from kernelcrew.kernels.importer.access import locals_defined_once
from kernelcrew.kernels.importer.poly import simplify
from kernelcrew.kernels.importer.promote import FLOAT_MATH, float_names
from kernelcrew.kernels.importer.source import Node, parse, walk

_MATH = set(FLOAT_MATH) | set(FLOAT_MATH.values()) | {"rsqrtf", "rsqrt"}
_ARITH = {"+", "-", "*", "/"}
_COMPOUND = {"+=", "-=", "*=", "/="}


@dataclass
class Flops:
    terms: dict[str, int] = field(default_factory=dict)  # multiplier expression -> ops
    notes: list[str] = field(default_factory=list)

    def add(self, mult: tuple[str, ...], n: int) -> None:
        key = "*".join(mult) if mult else "1"
        self.terms[key] = self.terms.get(key, 0) + n

    def expr(self) -> str:
        parts = []
        for k, v in sorted(self.terms.items(), key=lambda kv: (-len(kv[0]), kv[0])):
            if v:
                parts.append(k if v == 1 and k != "1" else (str(v) if k == "1" else f"{v}*{k}"))
        return " + ".join(parts) or "0"


def _c_to_expr(text: str, sizes: set[str], consts: dict[str, str] | None = None
               ) -> str | None:
    """A C bound (`B*T`, `N / 2`, `(n+1)`) as an op.yaml expression, or None."""
    for k, v in (consts or {}).items():
        text = re.sub(rf"\b{k}\b", v, text)
    t = re.sub(r"\(\s*(?:int|long|size_t|int64_t|unsigned)\s*\)", "", text)
    t = without_int_suffixes(t)
    t = re.sub(r"(?<![/])/(?![/])", "//", t)
    if not re.fullmatch(r"[\w\s+\-*/%()]+", t):
        return None
    try:
        if names_in(t) - sizes:
            return None
    except ExprError:
        return None
    return " ".join(t.split())


@dataclass
class Trip:
    var: str
    count: str  # an op.yaml expression in the sizes
    mean: str | None  # the counter's mean value, for loops inside whose bounds use it


def _trip(for_node: Node, src: bytes, sizes: set[str], consts: dict[str, str],
          outer: dict[str, str]) -> Trip | None:
    """The trip count of a `for` loop, in the sizes; a bound in an outer counter (a
    triangular nest) counts that counter at its mean, which is exact for linear bounds."""
    def s(n: Node | None) -> str:
        return src[n.start_byte:n.end_byte].decode() if n is not None else ""

    init = for_node.child_by_field_name("initializer")
    cond = for_node.child_by_field_name("condition")
    upd = for_node.child_by_field_name("update")
    if init is None or cond is None or upd is None or cond.type != "binary_expression":
        return None
    var = start = None
    if init.type == "declaration":
        d = init.child_by_field_name("declarator")
        if d is not None and d.type == "init_declarator":
            var, start = s(d.child_by_field_name("declarator")), s(d.child_by_field_name("value"))
    elif init.type == "assignment_expression":
        var, start = s(init.child_by_field_name("left")), s(init.child_by_field_name("right"))
    if not var:
        return None
    op = s(cond.child_by_field_name("operator"))
    left, right = s(cond.child_by_field_name("left")), s(cond.child_by_field_name("right"))
    flip = {"<": ">", "<=": ">=", ">": "<", ">=": "<="}
    if right == var and op in flip:
        left, right, op = right, left, flip[op]
    ut = " ".join(s(upd).split())
    if left != var:
        return None
    if ut in (f"{var}++", f"++{var}") or (m := re.fullmatch(
            rf"{re.escape(var)}\s*\+=\s*(.+)", ut)):
        step, up = ("1" if ut.endswith("++") or ut.startswith("++") else m.group(1)), True
    elif ut in (f"{var}--", f"--{var}"):
        step, up = "1", False
    else:
        return None
    if (up and op not in ("<", "<=", "!=")) or (not up and op not in (">", ">=")):
        return None
    known = sizes | set(outer)
    b, a, k = (_c_to_expr(x, known, consts) for x in (right, start, step))
    if k is None:
        return None
    local = b is None or a is None
    if local:
        # a block of fixed length from a local start: `r = r0; r < r0 + 16` is 16 trips
        # whatever r0 is; the counter's mean is then unknown (None)
        b, a = (_c_to_expr(x, known | _idents(x), consts) for x in (right, start))
        if b is None or a is None:
            return None
    b, a = (_at_means(x, outer) for x in (b, a))
    lo, hi = (a, b) if up else (b, a)
    incl = op in ("<=", ">=")
    span = simplify(f"({hi}) - ({lo})" + (" + 1" if incl else ""))
    if local and _idents(span) - sizes:
        return None
    count = span if k == "1" else f"ceil_div({span}, {k})"
    last = simplify(f"({hi})" + ("" if incl else " - 1"))
    return Trip(var, count, None if local else simplify(f"(({lo}) + ({last})) // 2"))


def _idents(text: str) -> set[str]:
    try:
        return set(names_in(text))
    except ExprError:
        return set(re.findall(r"[A-Za-z_]\w*", text))


def _while_trip(loop: Node, src: bytes, sizes: set[str], consts: dict[str, str]
                ) -> Trip | None:
    """The trip count of a counted `while (i < n) { ...; i++; }` or `do { ...; i++; }
    while (i < n);` whose counter the statement just before sets (`i = 0;`, `int i = 0;`)
    and the body steps by one exactly once, as one of its own statements (a `do` runs at
    least once; counted as max(n - start, 1) where the sizes make that positive, which
    they are on every case the cost is read for)."""
    def s(n: Node | None) -> str:
        return src[n.start_byte:n.end_byte].decode() if n is not None else ""

    cond = loop.child_by_field_name("condition")
    body = loop.child_by_field_name("body")
    while cond is not None and cond.type in ("parenthesized_expression", "condition_clause"):
        cond = cond.named_children[0] if cond.named_children else None
    if cond is None or body is None or cond.type != "binary_expression":
        return None
    var, op = s(cond.child_by_field_name("left")), s(cond.child_by_field_name("operator"))
    if cond.child_by_field_name("left").type != "identifier" or op not in ("<", "<="):
        return None
    steps = [c for c in walk(body) if (c.type == "update_expression" and " ".join(
        s(c).split()) in (f"{var}++", f"++{var}")) or (c.type == "assignment_expression" and
        s(c.child_by_field_name("left")) == var)]
    stmts = body.named_children if body.type == "compound_statement" else [body]
    if len(steps) != 1 or steps[0].parent is None or steps[0].parent not in stmts or \
            steps[0].type != "update_expression":
        return None
    prev = loop.prev_named_sibling
    start = None
    if prev is not None and prev.type == "declaration":
        for d in prev.children_by_field_name("declarator"):
            if d.type == "init_declarator" and s(d.child_by_field_name("declarator")) == var:
                start = s(d.child_by_field_name("value"))
    elif prev is not None and prev.type == "expression_statement" and prev.named_children \
            and prev.named_children[0].type == "assignment_expression":
        a = prev.named_children[0]
        if s(a.child_by_field_name("left")) == var and s(a.child_by_field_name("operator")) == "=":
            start = s(a.child_by_field_name("right"))
    if start is None:
        return None
    b, a = (_c_to_expr(x, sizes, consts) for x in (s(cond.child_by_field_name("right")), start))
    if b is None or a is None:
        return None
    span = simplify(f"({b}) - ({a})" + (" + 1" if op == "<=" else ""))
    last = simplify(f"({b})" + ("" if op == "<=" else " - 1"))
    return Trip(var, span, simplify(f"(({a}) + ({last})) // 2"))


def _at_means(expr: str, outer: dict[str, str]) -> str:
    for v, mean in outer.items():
        expr = re.sub(rf"\b{re.escape(v)}\b", f"({mean})", expr)
    return expr


@dataclass
class _Where:
    """What every function of one estimate shares."""

    helpers: dict[str, str]
    sizes: set[str]
    out: Flops
    where: str
    first_line: int
    float_types: frozenset[str]


def estimate_flops(fn_text: str, helpers: dict[str, str], sizes: set[str],
                   where: str = "", first_line: int = 1,
                   float_types: frozenset[str] = frozenset()) -> Flops:
    """Floating-point operations of the function in `fn_text`, as terms in the sizes;
    `float_types`: the file's typedefs of float types (`real_t`)."""
    out = Flops()
    _Counter(fn_text, _Where(helpers, sizes, out, where, first_line, float_types), 0
             ).count((), out)
    return out


class _Counter:
    """The count over one function's text (helpers called from it get their own)."""

    def __init__(self, text: str, w: _Where, depth: int) -> None:
        self.w, self.depth = w, depth
        self.data = text.encode()
        self.tree = parse(text)
        root = self.tree.root_node
        self.floats = float_names(root, self.data, w.float_types)
        self.pointers = _pointer_names(root, self.data)
        # `const int LOOP_UNROLL = 8;` is a number in loop bounds, and a local defined once
        # from the sizes (`int height_col = (height + 2*pad - ksize) / stride + 1;`) that
        # expression
        self.consts = dict(re.findall(
            r"\bconst\s+(?:int|long|size_t|int64_t)\s+(\w+)\s*=\s*(\d+)\s*;", text))
        self.consts.update(_size_locals(root, self.data, w.sizes, self.consts))
        self.outer: dict[str, str] = {}  # counters of the enclosing loops -> their means

    def s(self, n: Node) -> str:
        return self.data[n.start_byte:n.end_byte].decode()

    def floaty(self, n: Node) -> bool:
        for m in walk(n):
            if m.type == "identifier" and self.s(m) in self.floats:
                return True
            if m.type == "number_literal" and re.search(r"[.eEfF]", self.s(m)) and \
                    not self.s(m).lower().startswith("0x"):
                return True
            if m.type == "call_expression":
                f = m.child_by_field_name("function")
                if f is not None and self.s(f) in _MATH:
                    return True
        return False

    def count(self, mult: tuple[str, ...], acc: Flops) -> None:
        for fn in (c for c in self.tree.root_node.named_children
                   if c.type == "function_definition"):
            body = fn.child_by_field_name("body")
            if body is not None:
                self.visit(body, mult, acc)

    def visit(self, n: Node, mult: tuple[str, ...], acc: Flops) -> None:
        t = n.type
        if t == "for_statement":
            self.loop(n, mult, acc)
            return
        if t in ("while_statement", "do_statement"):
            trip = _while_trip(n, self.data, self.w.sizes, self.consts)
            if trip is None:
                self.w.out.notes.append(
                    f"{self.w.where}:{self.w.first_line + n.start_point.row}: a `while` "
                    "loop the cost model cannot count; counted as one trip")
            for c in n.children:
                self.visit(c, mult + ((_factor(trip.count),) if trip else ()), acc)
            return
        if t == "subscript_argument_list":
            return  # index arithmetic is not floating-point work
        if t == "compound_statement":
            self.block(n, mult, acc)
            return
        if t == "if_statement" and n.child_by_field_name("alternative") is not None:
            self.alternatives(n, mult, acc)
            return
        self.operation(n, mult, acc)
        for c in n.children:
            self.visit(c, mult, acc)

    def loop(self, n: Node, mult: tuple[str, ...], acc: Flops) -> None:
        trip = _trip(n, self.data, self.w.sizes, self.consts, self.outer)
        if trip is None:
            self.w.out.notes.append(f"{self.w.where}:{self.w.first_line + n.start_point.row}: "
                                    "loop bound not in the sizes; counted as one trip")
        body = n.child_by_field_name("body")
        if body is None:
            return
        if trip is not None and trip.mean is not None:
            self.outer[trip.var] = trip.mean
        self.visit(body, mult + ((_factor(trip.count),) if trip else ()), acc)
        if trip is not None:
            self.outer.pop(trip.var, None)

    def alternatives(self, n: Node, mult: tuple[str, ...], acc: Flops) -> None:
        """`if (...) A else B` (and `else if` chains) does A or B: each multiplier counts
        the larger of the two, not their sum."""
        cond = n.child_by_field_name("condition")
        if cond is not None:
            self.visit(cond, mult, acc)
        branches = []
        for field_name in ("consequence", "alternative"):
            b, part = n.child_by_field_name(field_name), Flops()
            if b is not None:
                self.visit(b, mult, part)
            branches.append(part.terms)
        for k in set(branches[0]) | set(branches[1]):
            acc.terms[k] = acc.terms.get(k, 0) + max(br.get(k, 0) for br in branches)

    def block(self, n: Node, mult: tuple[str, ...], acc: Flops) -> None:
        # `if (...) { fallback(...); return; }` then the main path: the two are
        # alternatives, so the fallback counts only when the rest does no work
        early, before = Flops(), dict(acc.terms)
        for c in n.children:
            self.visit(c, mult, early if _early_return(c) else acc)
        if acc.terms == before:
            for k, v in early.terms.items():
                acc.terms[k] = acc.terms.get(k, 0) + v

    def operation(self, n: Node, mult: tuple[str, ...], acc: Flops) -> None:
        t = n.type
        s = self.s
        if t == "binary_expression":
            op = n.child_by_field_name("operator")
            sides = [n.child_by_field_name("left"), n.child_by_field_name("right")]
            ptr = any(x is not None and x.type == "identifier" and s(x) in self.pointers
                      for x in sides)  # `row + i * n` is pointer arithmetic
            if op is not None and s(op) in _ARITH and not ptr and self.floaty(n):
                acc.add(mult, 1)
        elif t == "assignment_expression":
            op = n.child_by_field_name("operator")
            if op is not None and s(op) in _COMPOUND and self.floaty(n):
                acc.add(mult, 1)
        elif t == "call_expression":
            f = n.child_by_field_name("function")
            name = s(f) if f is not None else ""
            if name in _MATH:
                acc.add(mult, 1)
            elif name in self.w.helpers and self.depth < 4:
                _Counter(self.w.helpers[name], self.w, self.depth + 1).count(mult, acc)


def _factor(count: str) -> str:
    return count if re.fullmatch(r"\w+", count) else f"({count})"


def _size_locals(root: Node, data: bytes, sizes: set[str], consts: dict[str, str]
                 ) -> dict[str, str]:
    out: dict[str, str] = {}
    for fn in (c for c in root.named_children if c.type == "function_definition"):
        defs, _modified = locals_defined_once(fn, data)
        for _ in range(3):  # a local defined from another
            for name, node in defs.items():
                if name in out:
                    continue
                e = _c_to_expr(data[node.start_byte:node.end_byte].decode(), sizes,
                               {**consts, **out})
                if e is not None:
                    out[name] = f"({e})"
    return out


def _pointer_names(root: Node, data: bytes) -> set[str]:
    out: set[str] = set()
    for n in walk(root):
        if n.type == "pointer_declarator":
            d = n.child_by_field_name("declarator")
            while d is not None and d.type != "identifier":
                d = d.child_by_field_name("declarator")
            if d is not None:
                out.add(data[d.start_byte:d.end_byte].decode())
    return out


_LOOPS = ("for_statement", "while_statement", "do_statement", "for_range_loop")


def _early_return(n: Node) -> bool:
    """`if (...) { ...; return; }`, or `{ ...; continue; }` of the loop around it: what
    follows in the block is the other path."""
    if n.type != "if_statement" or n.child_by_field_name("alternative") is not None:
        return False
    cons = n.child_by_field_name("consequence")
    return cons is not None and any(
        m.type == "return_statement" or (m.type == "continue_statement"
                                         and not enclosed_by(m, cons, _LOOPS))
        for m in walk(cons))

