"""How a function touches its array parameters, read from its syntax tree (macros already
expanded): every subscript, whether it reads or writes, under which loops and whether
under a condition; where an array is handed to a call or to a local pointer.

Subscripts and loop ranges are polynomials (poly.py) in loop counters and the function's
integer parameters, with locals defined once substituted by their definition. Anything
else (a counter of a `while`, an index read from memory, a size the function modifies)
is left unknown (None): the caller then neither infers nor checks what depends on it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kernelcrew.kernels.importer.poly import Poly
from kernelcrew.kernels.importer.source import Node, walk

# C library calls that write through their first argument / only read their arguments
WRITES_FIRST = {"memset", "memcpy", "memmove", "strcpy", "strncpy", "__builtin_memset",
                "__builtin_memcpy", "__builtin_memmove"}
READS_ONLY = {"printf", "fprintf", "puts", "strlen", "memcmp", "strcmp", "qsort_r"}
MAX_BRANCHES = 8  # values a subscript with `?:` is followed through, at most
_UPDATE_OPS = {"+=", "-=", "*=", "/=", "%=", "|=", "&=", "^=", "<<=", ">>="}


@dataclass
class Loop:
    var: str
    lo: Poly | None  # the smallest value of the counter
    hi: Poly | None  # one past the largest value
    node: Node = field(repr=False)


@dataclass
class Access:
    array: str
    index: list[Poly | None]  # one per subscript, outermost first
    kind: str  # read | write | update (a compound assignment or ++/--: both)
    loops: list[Loop]  # enclosing loops, outermost first
    guarded: bool  # under an if, a ?: or a loop whose range is unknown
    pos: int  # evaluation order
    line: int
    # one past the largest subscript, where a condition around the access bounds it
    # (`if (j < len) ... x[j]`): a one-subscript access only
    limit: Poly | None = None


@dataclass
class Escape:
    """The array handed on: to a call, or to a local pointer the analysis cannot follow."""

    array: str
    how: str
    written: bool | None  # whether the callee writes through it; None: cannot tell
    pos: int
    line: int
    overwrites: bool = False  # memset/memcpy into it: written before anything reads it


@dataclass
class Accesses:
    accesses: list[Access] = field(default_factory=list)
    escapes: list[Escape] = field(default_factory=list)
    atoms: dict[str, str] = field(default_factory=dict)  # atom name -> op.yaml expression

    def of(self, name: str) -> list[Access]:
        return [a for a in self.accesses if a.array == name]

    def written(self, name: str) -> bool | None:
        """True where the function writes the array, False where it only reads it, None
        where it hands it to code that cannot be read."""
        if any(a.kind != "read" for a in self.of(name)):
            return True
        esc = [e for e in self.escapes if e.array == name]
        if any(e.written for e in esc):
            return True
        if any(e.written is None for e in esc):
            return None
        return False

    def read_first(self, name: str) -> bool:
        """Whether the array's first use reads it (or a write comes first only under a
        condition): its incoming values matter."""
        events = sorted([(a.pos, a.kind, a.guarded) for a in self.of(name)]
                        + [(e.pos, "write" if e.overwrites else "escape", False)
                           for e in self.escapes if e.array == name])
        for _pos, kind, guarded in events:
            if kind == "write" and not guarded:
                return False
            if kind != "write":
                return True
        return False


def analyze(fn_node: Node, data: bytes, arrays: set[str], sizes: set[str],
            helpers: dict[str, tuple[Node, bytes]] | None = None, depth: int = 0) -> Accesses:
    """The accesses of `fn_node` (a function_definition) to the parameters in `arrays`."""
    return _Walker(fn_node, data, arrays, sizes, helpers or {}, depth).run()


class _Walker:
    def __init__(self, fn: Node, data: bytes, arrays: set[str], sizes: set[str],
                 helpers: dict[str, tuple[Node, bytes]], depth: int) -> None:
        self.fn, self.data, self.arrays, self.sizes = fn, data, set(arrays), sizes
        self.helpers, self.depth = helpers, depth
        self.out = Accesses()
        self.pos = 0
        self.aliases: dict[str, tuple[str, Poly | None]] = {}  # local pointer -> (array, offset)
        self.defs, self.modified, self.once = _definitions(fn, data)
        self._atom_ids: dict[str, str] = {}
        self.guards: list[Node] = []  # the conditions around the node being visited

    def s(self, n: Node | None) -> str:
        return self.data[n.start_byte:n.end_byte].decode() if n is not None else ""

    def run(self) -> Accesses:
        body = self.fn.child_by_field_name("body")
        if body is not None:
            self.visit(body, [], False)
        return self.out

    # ---------------------------------------------------------------- walking
    def visit(self, n: Node, loops: list[Loop], guarded: bool) -> None:
        t = n.type
        if t == "for_statement":
            loop = self.loop(n, loops)
            for part in ("initializer", "condition", "update"):
                c = n.child_by_field_name(part)
                if c is not None:
                    self.visit(c, loops, guarded)
            body = n.child_by_field_name("body")
            if body is not None:
                if loop is None:
                    self.visit(body, loops, True)
                else:
                    self.visit(body, [*loops, loop], guarded)
            return
        if t in ("while_statement", "do_statement"):
            for c in n.named_children:
                self.visit(c, loops, True)
            return
        if t in ("if_statement", "conditional_expression"):
            kids = n.named_children
            if kids:
                self.visit(kids[0], loops, guarded)  # the condition runs every time
            for k, c in enumerate(kids[1:]):
                if k == 0:  # the branch the condition holds in
                    self.guards.append(kids[0])
                try:
                    self.visit(c, loops, True)
                finally:
                    if k == 0:
                        self.guards.pop()
            return
        if t == "assignment_expression":
            op = self.s(n.child_by_field_name("operator"))
            self.visit(n.child_by_field_name("right"), loops, guarded)
            self.target(n.child_by_field_name("left"), "write" if op == "=" else "update",
                        loops, guarded)
            return
        if t == "update_expression":
            self.target(n.child_by_field_name("argument"), "update", loops, guarded)
            return
        if t in ("subscript_expression", "pointer_expression") and self.element(n) is not None:
            self.record(n, "read", loops, guarded)
            return
        if t == "init_declarator":
            self.declare(n, loops, guarded)
            return
        if t == "call_expression":
            self.call(n, loops, guarded)
            return
        if t == "identifier" and self.s(n) in self.arrays | set(self.aliases):
            self.escape(n, "used as a pointer", None)
            return
        for c in n.children:
            self.visit(c, loops, guarded)

    def target(self, n: Node | None, kind: str, loops: list[Loop], guarded: bool) -> None:
        if n is None:
            return
        if self.element(n) is not None:
            self.record(n, kind, loops, guarded)
        else:
            self.visit(n, loops, guarded)

    def element(self, n: Node) -> tuple[str, list[Node]] | None:
        """(array, subscripts) of `A[i][j]`, `*(A + e)`, `*A`, or of an alias of A."""
        subs: list[Node] = []
        cur = n
        if cur.type == "pointer_expression" and self.s(cur.child_by_field_name("operator")) \
                == "*":
            arg = cur.child_by_field_name("argument")
            while arg is not None and arg.type == "parenthesized_expression":
                arg = arg.named_children[0] if arg.named_children else None
            if arg is None:
                return None
            if arg.type == "identifier":
                return (self.s(arg), [])  if self.s(arg) in self.arrays | set(self.aliases) \
                    else None
            if arg.type == "binary_expression" and self.s(arg.child_by_field_name(
                    "operator")) == "+":
                left, right = arg.child_by_field_name("left"), arg.child_by_field_name("right")
                for base, off in ((left, right), (right, left)):
                    if base is not None and base.type == "identifier" and \
                            self.s(base) in self.arrays | set(self.aliases):
                        return (self.s(base), [off])
            return None
        while cur.type == "subscript_expression":
            idx = cur.child_by_field_name("index")
            if idx is None:  # tree-sitter-cpp: subscript_argument_list
                lst = next((c for c in cur.named_children
                            if c.type == "subscript_argument_list"), None)
                idx = lst.named_children[0] if lst is not None and lst.named_children else None
            if idx is None:
                return None
            subs.insert(0, idx)
            cur = cur.child_by_field_name("argument") or cur.named_children[0]
        if subs and cur.type == "identifier" and self.s(cur) in self.arrays | set(self.aliases):
            return (self.s(cur), subs)
        return None

    def record(self, n: Node, kind: str, loops: list[Loop], guarded: bool) -> None:
        name, subs = self.element(n)  # type: ignore[misc]
        for sub in subs:
            self.visit(sub, loops, guarded)  # subscripts read other arrays (`x[ids[i]]`)
        branches = [self.polys(sub, loops) for sub in subs] or [[Poly.const(0)]]
        combos: list[list[Poly | None]] = [[]]
        for alts in branches:
            combos = [[*c, a] for c in combos for a in alts]
        if len(combos) > MAX_BRANCHES:
            combos = [[None] * len(branches)]
        self.pos += 1
        for index in combos:
            limit = self.limit(index[0], loops) if len(index) == 1 else None
            target = name
            if name in self.aliases:
                target, off = self.aliases[name]
                if len(index) != 1:
                    index = [None]
                index = [off + index[0] if off is not None and index[0] is not None else None]
                limit = off + limit if off is not None and limit is not None else None
            # one access per branch of a `?:` in the subscript: each is taken under the
            # branch's condition
            self.out.accesses.append(Access(target, index, kind, list(loops),
                                            guarded or len(combos) > 1, self.pos,
                                            n.start_point.row + 1, limit))

    def limit(self, index: Poly | None, loops: list[Loop]) -> Poly | None:
        """One past the largest value of the subscript `index` where a condition around
        the access compares that very expression with a bound (`(i - j) < len && j < n`
        around `y[i - j]`): the bound; None where none does."""
        if index is None:
            return None
        flip = {">": "<", ">=": "<="}
        for g in reversed(self.guards):
            for c in _conjuncts(g):
                op = self.s(c.child_by_field_name("operator"))
                left, right = c.child_by_field_name("left"), c.child_by_field_name("right")
                if op in flip:
                    left, right, op = right, left, flip[op]
                if op not in ("<", "<="):
                    continue
                lhs = self.poly(left, loops)
                if lhs is None or (lhs - index).terms:
                    continue
                rhs = self.poly(right, loops)
                if rhs is not None:
                    return rhs + Poly.const(1) if op == "<=" else rhs
        return None

    def declare(self, n: Node, loops: list[Loop], guarded: bool) -> None:
        value = n.child_by_field_name("value")
        decl = n.child_by_field_name("declarator")
        inner = decl.child_by_field_name("declarator") if decl is not None and \
            decl.type == "pointer_declarator" else None
        base = self.pointer_into(value, loops) if value is not None and inner is not None \
            and inner.type == "identifier" else None
        if base is None:
            if value is not None:
                self.visit(value, loops, guarded)
            return
        if base[2] is not None:
            self.visit(base[2], loops, guarded)  # the offset may read other arrays
        self.aliases[self.s(inner)] = (base[0], base[1])
        self.pos += 1

    def pointer_into(self, v: Node, loops: list[Loop]
                     ) -> tuple[str, Poly | None, Node | None] | None:
        """`A`, `A + e`, `&A[e]`: (array, offset, the offset's node)."""
        while v.type in ("parenthesized_expression", "cast_expression"):
            v = v.child_by_field_name("value") or v.named_children[-1]
        if v.type == "identifier" and self.s(v) in self.arrays:
            return (self.s(v), Poly.const(0), None)
        if v.type == "binary_expression" and self.s(v.child_by_field_name("operator")) == "+":
            left, right = v.child_by_field_name("left"), v.child_by_field_name("right")
            for base, off in ((left, right), (right, left)):
                if base is not None and base.type == "identifier" and self.s(base) in \
                        self.arrays:
                    return (self.s(base), self.poly(off, loops), off)
        if v.type == "pointer_expression" and self.s(v.child_by_field_name("operator")) == "&":
            el = self.element(v.child_by_field_name("argument"))
            if el is not None and len(el[1]) == 1 and el[0] in self.arrays:
                return (el[0], self.poly(el[1][0], loops), el[1][0])
        return None

    def call(self, n: Node, loops: list[Loop], guarded: bool) -> None:
        f = n.child_by_field_name("function")
        name = self.s(f)
        args = n.child_by_field_name("arguments")
        for k, a in enumerate(args.named_children if args is not None else []):
            base = self.pointer_into(a, loops) if a.type != "identifier" or \
                self.s(a) in self.arrays else None
            if a.type == "identifier" and self.s(a) in self.aliases:
                base = (self.aliases[self.s(a)][0], None, None)
            if base is None:
                self.visit(a, loops, guarded)
                continue
            if base[2] is not None:
                self.visit(base[2], loops, guarded)
            self.escape(a, f"passed to {name}()", self.callee_writes(name, k), base[0])
            if name in WRITES_FIRST and k == 0:
                self.out.escapes[-1].overwrites = True

    def callee_writes(self, name: str, k: int) -> bool | None:
        if name in WRITES_FIRST:
            return k == 0
        if name in READS_ONLY:
            return False
        helper = self.helpers.get(name)
        if helper is None or self.depth > 4:
            return None
        node, data = helper
        params = _param_names(node, data)
        if k >= len(params):
            return None
        sub = analyze(node, data, {params[k]}, set(), self.helpers, self.depth + 1)
        return sub.written(params[k])

    def escape(self, n: Node, how: str, written: bool | None, array: str | None = None
               ) -> None:
        name = array or self.s(n)
        if name in self.aliases:
            name = self.aliases[name][0]
        self.pos += 1
        self.out.escapes.append(Escape(name, how, written, self.pos, n.start_point.row + 1))

    # ---------------------------------------------------------------- loops and polynomials
    def loop(self, n: Node, outer: list[Loop]) -> Loop | None:
        init = n.child_by_field_name("initializer")
        cond = n.child_by_field_name("condition")
        upd = n.child_by_field_name("update")
        if init is None or cond is None or upd is None or cond.type != "binary_expression":
            return None
        var, start = None, None
        if init.type == "declaration":
            d = init.child_by_field_name("declarator")
            if d is not None and d.type == "init_declarator":
                var, start = self.s(d.child_by_field_name("declarator")), \
                    d.child_by_field_name("value")
        elif init.type == "assignment_expression" and self.s(
                init.child_by_field_name("operator")) == "=":
            var, start = self.s(init.child_by_field_name("left")), \
                init.child_by_field_name("right")
        if not var or start is None:
            return None
        step = _step(self.s(upd), var)
        op = self.s(cond.child_by_field_name("operator"))
        left, right = cond.child_by_field_name("left"), cond.child_by_field_name("right")
        bound = None
        if self.s(left) == var:
            bound, rel = right, op
        elif self.s(right) == var:
            bound, rel = left, {"<": ">", "<=": ">=", ">": "<", ">=": "<="}.get(op, op)
        if bound is None or step is None:
            return None
        a, b = self.poly(start, outer), self.poly(bound, outer)
        if a is None or b is None:
            return Loop(var, None, None, n)
        one = Poly.const(1)
        if step > 0 and rel in ("<", "!="):
            lo, hi = a, b
        elif step > 0 and rel == "<=":
            lo, hi = a, b + one
        elif step < 0 and rel == ">=":
            lo, hi = b, a + one
        elif step < 0 and rel == ">":
            lo, hi = b + one, a + one
        else:
            return Loop(var, None, None, n)
        return Loop(var, lo, hi, n)

    def poly(self, n: Node | None, loops: list[Loop], seen: frozenset[str] = frozenset()
             ) -> Poly | None:
        if n is None:
            return None
        t = n.type
        if t == "number_literal":
            text = self.s(n).rstrip("uUlL")
            try:
                return Poly.const(int(text, 0))
            except ValueError:
                return None
        if t == "identifier":
            name = self.s(n)
            if any(lp.var == name for lp in loops):
                return Poly.name(name)
            value = self.once_value(n, loops, seen)
            if value is not None:
                return self.poly(value, loops, seen | {name})
            if name in self.modified:
                return None
            if name in self.sizes:
                return Poly.name(name)
            if name in self.defs and name not in seen:
                text = self.expr(self.defs[name], seen | {name})
                if text is not None and ("//" in text or "%" in text):
                    return self.atom(self.defs[name], loops, seen | {name})
                return self.poly(self.defs[name], loops, seen | {name})
            return None
        if t in ("parenthesized_expression", "binary_expression"):
            # a quotient in the sizes alone stays whole (`(h + 2*pad - k)/stride + 1`)
            text = self.expr(n, seen)
            if text is not None and ("//" in text or "%" in text):
                return self.atom(n, loops, seen)
        if t in ("parenthesized_expression",):
            return self.poly(n.named_children[0] if n.named_children else None, loops, seen)
        if t == "cast_expression":
            return self.poly(n.child_by_field_name("value"), loops, seen)
        if t == "unary_expression":
            op = self.s(n.child_by_field_name("operator"))
            p = self.poly(n.child_by_field_name("argument"), loops, seen)
            return None if p is None else (-p if op == "-" else p if op == "+" else None)
        if t == "binary_expression":
            op = self.s(n.child_by_field_name("operator"))
            a = self.poly(n.child_by_field_name("left"), loops, seen)
            b = self.poly(n.child_by_field_name("right"), loops, seen)
            if a is not None and b is not None and op in ("+", "-", "*"):
                return a + b if op == "+" else a - b if op == "-" else a * b
            if a is not None and op == "<<" and b is not None and b.constant() is not None:
                return a * Poly.const(2 ** b.constant())
            if op in ("/", "%") and a is not None and b is not None:
                return self.atom(n, loops, seen)
            return None
        return None

    def once_value(self, n: Node, loops: list[Loop], seen: frozenset[str]) -> Node | None:
        """The value of a local set by its one assignment (`assigned_once`), where that
        assignment holds at the use `n`: inside every loop around the assignment, and
        after it."""
        name = self.s(n)
        a = self.once.get(name)
        if a is None or name in seen or a.start_byte > n.start_byte:
            return None
        if not _loops_around(a) <= {lp.node.start_byte for lp in loops}:
            return None
        return a.child_by_field_name("right")

    def polys(self, n: Node | None, loops: list[Loop], seen: frozenset[str] = frozenset()
              ) -> list[Poly | None]:
        """The values a subscript may take, one per branch of the `?:` in it or in the
        locals it reads (`w = (x == 0) ? c : c - 1`); [poly] where it has none, and
        [None] past MAX_BRANCHES."""
        if n is None:
            return [None]
        t = n.type
        if t == "conditional_expression":
            out = self.polys(n.child_by_field_name("consequence"), loops, seen) \
                + self.polys(n.child_by_field_name("alternative"), loops, seen)
            return out if len(out) <= MAX_BRANCHES else [None]
        if t == "parenthesized_expression" and n.named_children:
            return self.polys(n.named_children[0], loops, seen)
        if t == "identifier" and not any(lp.var == self.s(n) for lp in loops):
            name = self.s(n)
            value = self.once_value(n, loops, seen)
            if value is None and name in self.defs and name not in self.modified:
                value = self.defs[name]
            if value is not None and name not in seen:
                return self.polys(value, loops, seen | {name})
        if t == "binary_expression" and \
                self.s(n.child_by_field_name("operator")) in ("+", "-", "*"):
            op = self.s(n.child_by_field_name("operator"))
            left = self.polys(n.child_by_field_name("left"), loops, seen)
            right = self.polys(n.child_by_field_name("right"), loops, seen)
            if len(left) > 1 or len(right) > 1:
                if len(left) * len(right) > MAX_BRANCHES:
                    return [None]
                return [None if a is None or b is None else
                        a + b if op == "+" else a - b if op == "-" else a * b
                        for a in left for b in right]
        return [self.poly(n, loops, seen)]

    def atom(self, n: Node, loops: list[Loop], seen: frozenset[str]) -> Poly | None:
        """A quotient in the sizes alone, as one name standing for its expression."""
        text = self.expr(n, seen)
        while text is not None and text.startswith("(") and text.endswith(")") and \
                _balanced(text[1:-1]):
            text = text[1:-1]
        if text is None:
            return None
        if text not in self._atom_ids:
            name = f"_q{len(self._atom_ids)}"
            self._atom_ids[text] = name
            self.out.atoms[name] = text
        return Poly.name(self._atom_ids[text])

    def expr(self, n: Node, seen: frozenset[str]) -> str | None:
        """An op.yaml expression for a subtree in the sizes only (`/` becomes `//`)."""
        t = n.type
        if t == "number_literal":
            text = self.s(n).rstrip("uUlL")
            return text if text.isdigit() else None
        if t == "identifier":
            name = self.s(n)
            if name in self.sizes and name not in self.modified:
                return name
            if name in self.defs and name not in seen and name not in self.modified:
                inner = self.expr(self.defs[name], seen | {name})
                return f"({inner})" if inner is not None else None
            return None
        if t == "parenthesized_expression" and n.named_children:
            inner = self.expr(n.named_children[0], seen)
            return f"({inner})" if inner is not None else None
        if t == "cast_expression":
            v = n.child_by_field_name("value")
            return self.expr(v, seen) if v is not None else None
        if t == "binary_expression":
            op = self.s(n.child_by_field_name("operator"))
            if op not in ("+", "-", "*", "/", "%"):
                return None
            a = self.expr(n.child_by_field_name("left"), seen)
            b = self.expr(n.child_by_field_name("right"), seen)
            if a is None or b is None:
                return None
            return f"{a} {'//' if op == '/' else op} {b}"
        return None


def _conjuncts(cond: Node) -> list[Node]:
    """The comparisons a condition holds only if all hold: `a && (b && c)` -> a, b, c."""
    while cond.type in ("parenthesized_expression", "condition_clause") and cond.named_children:
        cond = cond.named_children[-1] if cond.type == "condition_clause" else \
            cond.named_children[0]
    if cond.type != "binary_expression":
        return []
    op = cond.child_by_field_name("operator").type
    if op == "&&":
        return _conjuncts(cond.child_by_field_name("left")) + \
            _conjuncts(cond.child_by_field_name("right"))
    return [cond] if op in ("<", "<=", ">", ">=") else []


def _balanced(text: str) -> bool:
    depth = 0
    for ch in text:
        depth += ch == "("
        depth -= ch == ")"
        if depth < 0:
            return False
    return depth == 0


def _step(text: str, var: str) -> int | None:
    t = "".join(text.split())
    if t in (f"{var}++", f"++{var}"):
        return 1
    if t in (f"{var}--", f"--{var}"):
        return -1
    for sign, op in ((1, "+="), (-1, "-=")):
        if t.startswith(f"{var}{op}"):
            k = t[len(var) + 2:]
            return sign * int(k) if k.isdigit() and int(k) > 0 else (sign if k else None)
    if t.startswith(f"{var}={var}+"):
        return 1
    return None


def locals_defined_once(fn: Node, data: bytes) -> tuple[dict[str, Node], set[str]]:
    """Locals defined once (`int idx = ...;`, never assigned again): name -> value; and the
    names that are assigned anywhere (modified), loop counters included."""
    defs, modified, _once = _definitions(fn, data)
    return defs, modified


def assigned_once(fn: Node, data: bytes) -> dict[str, Node]:
    """Locals declared without a value and set by exactly one plain assignment, a
    statement of its own (`int c; ... c = x + y * nx;`, C89's style): name -> the
    assignment. Its value holds where the assignment's loops enclose the use and the
    assignment comes first (`_Walker.poly` checks both)."""
    return _definitions(fn, data)[2]


def _definitions(fn: Node, data: bytes
                 ) -> tuple[dict[str, Node], set[str], dict[str, Node]]:
    def s(n: Node) -> str:
        return data[n.start_byte:n.end_byte].decode()

    inits: dict[str, list[Node]] = {}
    assigned: dict[str, int] = {}
    bare: set[str] = set()  # declared without a value
    plain: dict[str, list[Node]] = {}  # name -> its `name = value;` statements
    for n in walk(fn):
        if n.type == "declaration":
            for d in n.children_by_field_name("declarator"):
                if d.type == "identifier":
                    bare.add(s(d))
        if n.type == "init_declarator":
            d, v = n.child_by_field_name("declarator"), n.child_by_field_name("value")
            if d is not None and d.type == "identifier" and v is not None:
                inits.setdefault(s(d), []).append(v)
        elif n.type == "assignment_expression":
            left = n.child_by_field_name("left")
            if left is not None and left.type == "identifier":
                assigned[s(left)] = assigned.get(s(left), 0) + 1
                if s(n.child_by_field_name("operator")) == "=" and n.parent is not None \
                        and n.parent.type == "expression_statement":
                    plain.setdefault(s(left), []).append(n)
        elif n.type == "update_expression":
            arg = n.child_by_field_name("argument")
            if arg is not None and arg.type == "identifier":
                assigned[s(arg)] = assigned.get(s(arg), 0) + 1
    defs = {k: v[0] for k, v in inits.items() if len(v) == 1 and k not in assigned}
    once = {k: v[0] for k, v in plain.items()
            if k in bare and k not in inits and len(v) == 1 and assigned.get(k) == 1}
    return defs, set(assigned), once


def _loops_around(n: Node) -> set[int]:
    """The start bytes of the for statements enclosing a node (its own body's loops)."""
    out = set()
    p = n.parent
    while p is not None:
        if p.type == "for_statement":
            out.add(p.start_byte)
        p = p.parent
    return out


def _param_names(fn: Node, data: bytes) -> list[str]:
    d = fn.child_by_field_name("declarator")
    while d is not None and d.type != "function_declarator":
        d = d.child_by_field_name("declarator")
    plist = d.child_by_field_name("parameters") if d is not None else None
    out = []
    for p in plist.named_children if plist is not None else []:
        name = ""
        for m in walk(p):
            if m.type == "identifier":
                name = data[m.start_byte:m.end_byte].decode()
                break
        out.append(name)
    return out
