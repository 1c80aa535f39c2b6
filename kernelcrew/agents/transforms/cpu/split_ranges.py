"""Index-set splitting: a loop whose body tests its counter against bounds, run as the
ranges where the test is decided.

Padding and borders are tested element by element in code written for clarity; after the
`inline_helpers` view, darknet's im2col reads

    for (int w = 0; w < width_col; ++w) {
        int im_col = w_offset + w * stride;
        ...
        int col_1 = im_col;
        col_1 -= pad;
        data_col[col_index] = (row_1 < 0 || col_1 < 0 || row_1 >= height || col_1 >= width)
                              ? 0 : data_im[col_1 + width * (row_1 + height * c_im)];
    }

The test runs on every element and the loop vectorizes only as a masked gather, if at all.
Each comparison of the counter is linear in it (`col_1` is `w_offset + w * stride - pad`),
so the elements where every comparison that moves with `w` is false form one range
[kc_lo, kc_hi), computed once before the loop. The move runs the loop as three: the
elements before the range and after it as written, and the range with those comparisons
taken out of the test (what is left, `row_1 < 0 || row_1 >= height`, does not change in the
loop, and the compiler takes it out of the loop):

    for (int w = 0; w < kc_lo; ++w) { ...as written... }
    for (int w = kc_lo; w < kc_hi; ++w) { ... (row_1 < 0 || row_1 >= height) ? 0 : ... }
    for (int w = kc_hi; w < width_col; ++w) { ...as written... }

The same with a test of `&&` terms (`x >= 0 && x < n ? in[x] : 0`): the range is where every
term that moves with the counter is true. An equality with the first or last cell (`w =
(x == 0) ? c : c - 1`, a stencil's clamped neighbour) is decided on the side of it away
from that end. Every test of the body is taken at once: the middle range is where all of
them are decided. Tests on an outer counter inside an inner loop (`y == 0` in the loop over
x) split the outer loop the same way after the inner ones, its body copied with the split
inner loops in it, so the middle of a grid reads its neighbours at fixed offsets and
vectorizes.

Legal where: the loop counts by one (`<` or `<=`) with its own counter, and carries no
worksharing pragma (its `omp simd` and unroll hints go on each of the three loops); the
test is a conditional expression or an `if` in the body, a plain `||` or `&&` of integer
comparisons (an equality only at a constant distance from the first or last value, where
one side decides it); each comparison's sides are linear in the counter through integer
locals the body sets before the test in straight-line statements (`int c = a + w * s;`,
`c -= pad;`), from names the loop does not write; a test inside an inner loop reads
nothing that loop sets; no `break` ends the loop (in the first piece it would not end the
other two) and its body holds no label. A comparison whose coefficient of the
counter is not a positive constant (`stride`) is split only where it is positive at run
time: where it is not, the whole range runs as written. The range's ends are exact
ceilings (`a*w + c < 0` for `w < ceil(-c / a)`), so each element takes the branch it took
before; nothing else changes.
"""

from __future__ import annotations

from kernelcrew.agents.transforms.analysis.common import (
    collapsed,
    finish,
    fresh_name,
    in_small_path,
    model_of,
    statements,
    written_names,
)
from kernelcrew.agents.transforms.analysis.dependence import innermost_breakable
from kernelcrew.agents.transforms.analysis.types import SIGNED_INTEGERS, decl_type
from kernelcrew.csource.affine import Poly, p_add, p_binary, p_derivative
from kernelcrew.csource.syntax import (
    Edit,
    Loop,
    Node,
    Source,
    lead_start,
    lookup,
    pragma_text,
    pragmas_before,
    same,
    unparen,
    walk,
    within,
)

_FLIP = {"<": ">", "<=": ">=", ">": "<", ">=": "<="}
COUNTER = "\0w"  # the loop's counter in the polynomials


# ---------------------------------------------------------------- integer polynomials

def _c_text(p: Poly) -> str:
    """The polynomial as a C expression in long long."""
    if not p:
        return "0LL"
    terms = []
    for m, c in sorted(p.items()):
        factors = [f"(long long)({x})" for x in m]
        if c != 1 or not factors:
            factors.insert(0, f"{c}LL" if c >= 0 else f"({c}LL)")
        terms.append(" * ".join(factors))
    return " + ".join(terms)


class _Reader:
    """Integer expressions of the loop body as polynomials in the counter and the names the
    loop does not write; the body's own integer locals are read through what the body set
    them to (`env`)."""

    def __init__(self, s: Source, lp: Loop, fn: Node) -> None:
        self.s, self.lp = s, lp
        self.env: dict[str, Poly | None] = {}
        self.written = written_names(lp.node)
        self.addressed = {x.child_by_field_name("argument").text.decode() for x in walk(fn)
                          if x.type == "pointer_expression" and
                          x.child_by_field_name("operator").type == "&" and
                          x.child_by_field_name("argument").type == "identifier"}

    def poly(self, n: Node) -> Poly | None:
        n = unparen(n)
        t = n.type
        if t == "number_literal":
            text = n.text.decode().lower().rstrip("ul")
            try:
                return {(): int(text, 0)} if int(text, 0) else {}
            except ValueError:
                return None
        if t == "identifier":
            return self._name(n)
        if t == "unary_expression":
            op = n.child_by_field_name("operator").type
            inner = self.poly(n.child_by_field_name("argument"))
            if inner is None or op not in ("-", "+"):
                return None
            return inner if op == "+" else p_add({}, inner, -1)
        if t == "binary_expression":
            op = n.child_by_field_name("operator").type
            return p_binary(op, self.poly(n.child_by_field_name("left")),
                            self.poly(n.child_by_field_name("right")))
        if t == "cast_expression":
            ty = n.child_by_field_name("type")
            if ty is None or self.s.text_of(ty).strip() not in SIGNED_INTEGERS:
                return None
            return self.poly(n.child_by_field_name("value"))
        return None

    def _name(self, n: Node) -> Poly | None:
        name = n.text.decode()
        d = lookup(name, n)
        if d is None or d.pointer or d.array or decl_type(self.s, d.node) not in SIGNED_INTEGERS:
            return None  # not a signed integer: unsigned arithmetic wraps
        if self.lp.decl is not None and d.node.start_byte == self.lp.decl.start_byte and \
                name == self.lp.var:
            return {(COUNTER,): 1}
        if within(d.node, self.lp.body):
            return self.env.get(name)  # a body local: what the body set it to, if known
        if name in self.written or name in self.addressed:
            return None  # changes in the loop (or may, through its address)
        return {(name,): 1}

    def step(self, stmt: Node) -> None:
        """Read one statement of the body: what it sets its integer locals to."""
        if stmt.type == "declaration":
            ty = decl_type(self.s, stmt)
            for d in stmt.named_children:
                if d.type == "init_declarator":
                    dec, val = d.child_by_field_name("declarator"), d.child_by_field_name("value")
                    if dec is not None and dec.type == "identifier":
                        self.env[dec.text.decode()] = self.poly(val) if ty in SIGNED_INTEGERS and \
                            val is not None else None
                elif d.type == "identifier":
                    self.env[d.text.decode()] = None
            return
        if stmt.type == "expression_statement" and stmt.named_children:
            e = stmt.named_children[0]
            if e.type == "assignment_expression":
                left, right = e.child_by_field_name("left"), e.child_by_field_name("right")
                op = e.child_by_field_name("operator").type
                if left.type == "identifier" and left.text.decode() in self.env:
                    name = left.text.decode()
                    cur, val = self.env[name], self.poly(right)
                    self.env[name] = None if val is None else \
                        val if op == "=" else \
                        None if cur is None else \
                        p_add(cur, val) if op == "+=" else \
                        p_add(cur, val, -1) if op == "-=" else None
                    return
        for name in written_names(stmt):  # anything else the statement writes: unknown
            if name in self.env:
                self.env[name] = None


# ---------------------------------------------------------------- the test

def _terms(cond: Node) -> tuple[str, list[Node]] | None:
    """('||' or '&&', the comparisons) of a test that is one of them over comparisons."""
    cond = unparen(cond)
    if cond.type == "binary_expression" and \
            cond.child_by_field_name("operator").type in ("||", "&&"):
        op = cond.child_by_field_name("operator").type
        out: list[Node] = []
        for side in ("left", "right"):
            sub = _terms(cond.child_by_field_name(side))
            if sub is None or (sub[0] != op and len(sub[1]) > 1):
                return None
            out += sub[1]
        return op, out
    if cond.type == "binary_expression" and \
            cond.child_by_field_name("operator").type in (*_FLIP, "==", "!="):
        return "||", [cond]
    return None


class _Split:
    """The range where the test's terms that move with the counter are decided."""

    def __init__(self) -> None:
        # (numerator, coefficient) of ceil(n / a): the range starts at the largest of lo
        # and ends before the smallest of hi
        self.lo: list[tuple[Poly, Poly]] = []
        self.hi: list[tuple[Poly, Poly]] = []
        self.positive: list[str] = []  # coefficients to test at run time (> 0)
        self.kept: list[Node] = []  # the comparisons that do not move with the counter


def _set_before(stmt: Node, cond: Node) -> bool:
    """The statement holding the test may set a name the test reads before the test runs
    (`if (c) { x -= 5; y = x < 0 ? ... }`): the body's straight-line reading of it would be
    wrong there. The target of a plain `x = test ? a : b;` is set after the test."""
    names = {x.text.decode() for x in walk(cond) if x.type == "identifier"}
    target = None
    if stmt.type == "expression_statement" and stmt.named_children and \
            stmt.named_children[0].type == "assignment_expression":
        e = stmt.named_children[0]
        if written_names(e.child_by_field_name("right")) == set():
            target = e.child_by_field_name("left")
    written = written_names(stmt)
    if target is not None and target.type == "identifier":
        written.discard(target.text.decode())
    return bool(names & written)


def _split(r: _Reader, kind: str, cmps: list[Node]) -> _Split | None:
    sp = _Split()
    for c in cmps:
        op = c.child_by_field_name("operator").type
        left, right = r.poly(c.child_by_field_name("left")), r.poly(c.child_by_field_name("right"))
        if left is None or right is None:
            return None
        d = p_add(left, right, -1)  # d OP 0: a*w + rest OP 0
        a = p_derivative(d, COUNTER)
        if a is None:
            return None  # the counter squared
        rest = {m: k for m, k in d.items() if COUNTER not in m}
        if not a:
            sp.kept.append(c)
            continue
        if op in ("==", "!="):
            if not _border(r, sp, kind, op, a, rest):
                return None
            continue
        if set(a) == {()} and a[()] < 0:  # a negative constant: turn the comparison round
            a, rest, op = p_add({}, a, -1), p_add({}, rest, -1), _FLIP[op]
        if set(a) != {()}:
            sp.positive.append(_c_text(a))
        # a*w + rest OP 0, a > 0: the comparison holds for w < T (below) or w >= T
        num = p_add({}, rest, -1)  # a*w OP -rest
        if op in ("<=", ">"):
            num = p_add(num, {(): 1})  # a*w <= x is a*w < x + 1; a*w > x is a*w >= x + 1
        bound = (num, a)
        below = op in ("<", "<=")
        # `||`: the range is where the term is false; `&&`: where it is true
        (sp.lo if below == (kind == "||") else sp.hi).append(bound)
    if not sp.lo and not sp.hi:
        return None
    return sp


def _border(r: _Reader, sp: _Split, kind: str, op: str, a: Poly, rest: Poly) -> bool:
    """An equality of the counter with one point (`x == 0`, `x != nx - 1`): decided on
    either side of the point, so the range is the side away from the loop's end the point
    lies at (a constant distance from its first or last value); False where the test is
    not decided on a side (`x != 0` in a `||`), or the point lies at neither end."""
    if (op == "==") != (kind == "||") or set(a) != {()} or abs(a[()]) != 1:
        return False
    point = p_add({}, rest, -a[()])  # a*w + rest == 0 at w == point (a is 1 or -1)
    first, last = r.poly(r.lp.start), r.poly(r.lp.end)
    if first is None or last is None:
        return False
    if not r.lp.inclusive:
        last = p_add(last, {(): -1})
    near_first = p_add(point, first, -1)
    near_last = p_add(last, point, -1)
    if set(near_first) <= {()}:  # the point is the first value, or a few past it
        sp.lo.append((p_add(point, {(): 1}), {(): 1}))  # w >= point + 1
    elif set(near_last) <= {()}:
        sp.hi.append((point, {(): 1}))  # w < point
    else:
        return False
    return True


def _ceil_text(num: Poly, a: Poly, names: tuple[str, str, str]) -> str:
    """ceil(num / a) for a > 0, as statements that leave it in `names[0]` (C's division
    truncates toward zero: the ceiling of a positive quotient rounds up)."""
    t, n, d = names
    if a == {(): 1}:
        return f"const long long {t} = {_c_text(num)};"
    return (f"const long long {n} = {_c_text(num)}, {d} = {_c_text(a)}; "
            f"const long long {t} = {n} > 0 ? ({n} + {d} - 1) / {d} : {n} / {d};")


# ---------------------------------------------------------------- the move

def _site(s: Source, fn: Node, lp: Loop) -> tuple[list[tuple[Node, str, list[Node]]],
                                                    _Split] | None:
    """The tests in the body the move takes, each with its kind and the comparisons it
    keeps in the middle range, and their splits merged (the middle range is where every
    one of them is decided); None where there is none. A test inside an inner loop is
    taken where it reads nothing that loop sets (`_set_before`)."""
    if lp.var is None or lp.start is None or lp.end is None or \
            lp.step is not None or lp.decl is None or lp.decl.parent is None or \
            lp.decl.parent.start_byte != lp.node.start_byte or in_small_path(lp.node) or \
            collapsed(s, lp) or lp.var in written_names(lp.body):
        return None
    for p in pragmas_before(lp.node):
        text = pragma_text(s, p)
        if text.startswith("omp") and not text.startswith("omp simd"):
            return None
    if _leaves(lp.node):
        return None
    r = _Reader(s, lp, fn)
    tests: list[tuple[Node, str, list[Node]]] = []
    merged = _Split()
    for stmt in statements(lp.body):
        for n in walk(stmt):
            cond = n.child_by_field_name("condition") \
                if n.type in ("conditional_expression", "if_statement") else None
            if cond is not None and cond.type == "condition_clause":
                cond = cond.child_by_field_name("value")  # C++'s `if (...)`: the expression
            while cond is not None and unparen(cond).type == "unary_expression" and \
                    unparen(cond).child_by_field_name("operator").type == "!":
                cond = unparen(cond).child_by_field_name("argument")  # `!((x < 0) || (x >= n))`
            if cond is None or any(within(cond, t) or within(t, cond) for t, _k, _c in tests):
                continue
            got = _terms(cond)
            if got is None or written_names(cond) or \
                    any(x.type == "call_expression" for x in walk(cond)) or \
                    _set_before(stmt, cond):
                continue
            sp = _split(r, got[0], got[1])
            if sp is not None:
                tests.append((cond, got[0], sp.kept))
                merged.lo += sp.lo
                merged.hi += sp.hi
                merged.positive += sp.positive
        r.step(stmt)
    return (tests, merged) if tests else None


def _leaves(loop: Node) -> bool:
    """A `break` that ends `loop` itself (in the first piece it would not end the two after
    it), or a label in its body (the copies would define it three times)."""
    for n in walk(loop.child_by_field_name("body")):
        if n.type == "labeled_statement":
            return True
        if n.type == "break_statement" and same(innermost_breakable(n), loop):
            return True
    return False


def _pieces(s: Source, m, lp: Loop, tests: list[tuple[Node, str, list[Node]]],
            sp: _Split) -> str:
    ind = s.indent_of(lp.node)
    lo, hi = fresh_name(m, "kc_lo"), fresh_name(m, "kc_hi")
    pragmas = "".join(f"{ind}    {s.text_of(p).strip()}\n" for p in pragmas_before(lp.node))
    var = lp.var
    ty = s.text_of(lp.decl.child_by_field_name("type")).strip()
    start = s.text_of(lp.start).strip()
    end = s.text_of(lp.end).strip()
    end_ll = f"(long long)({end})" + (" + 1" if lp.inclusive else "")
    body = _deeper(s.text_of(lp.body))
    # the middle range's body: each test with the comparisons that move with the counter
    # taken out (decided there)
    parts, at = [], lp.body.start_byte
    for cond, kind, kept in sorted(tests, key=lambda t: t[0].start_byte):
        if kind == "||":
            keep = " || ".join(s.text_of(c) for c in kept) or "0"
        else:
            keep = " && ".join(s.text_of(c) for c in kept) or "1"
        parts += [s.data[at:cond.start_byte].decode(), f"({keep})"]
        at = cond.end_byte
    inner = _deeper("".join(parts) + s.data[at:lp.body.end_byte].decode())
    b = ind + "    "
    lines = [f"{ind}{{  // kernelcrew: split_ranges: {var}'s tests decided in [{lo}, {hi})",
             f"{b}long long {lo} = (long long)({start}), {hi} = {end_ll};"]
    names = (fresh_name(m, "kc_t"), fresh_name(m, "kc_n"), fresh_name(m, "kc_d"))
    t = names[0]
    sets = [f"{b}    {{ {_ceil_text(*x, names)} if ({t} > {lo}) {lo} = {t}; }}" for x in sp.lo]
    sets += [f"{b}    {{ {_ceil_text(*x, names)} if ({t} < {hi}) {hi} = {t}; }}" for x in sp.hi]
    test = " && ".join(f"({x}) > 0" for x in dict.fromkeys(sp.positive)) or "1"
    lines += [f"{b}if ({test}) {{", *sets,
              f"{b}}} else {{",
              f"{b}    {lo} = {hi};  // not split: the whole range as written",
              f"{b}}}",
              f"{b}if ({lo} < (long long)({start})) {lo} = (long long)({start});",
              f"{b}if ({lo} > {end_ll}) {lo} = {end_ll};",
              f"{b}if ({hi} > {end_ll}) {hi} = {end_ll};",
              f"{b}if ({hi} < {lo}) {hi} = {lo};"]
    head = f"for ({ty} {var} = "
    lines += [f"{pragmas}{b}{head}{start}; {var} < ({ty}){lo}; ++{var}) {body}".lstrip("\n"),
              f"{pragmas}{b}{head}({ty}){lo}; {var} < ({ty}){hi}; ++{var}) {inner}",
              (f"{pragmas}{b}{head}({ty}){hi}; {var} {'<=' if lp.inclusive else '<'} {end}; "
              f"++{var}) {body}"),
              f"{ind}}}"]
    return "\n".join(lines)


def _deeper(text: str) -> str:
    """A statement's text one level deeper after its first line (preprocessor lines stay
    at the margin)."""
    first, *rest = text.split("\n")
    return "\n".join([first] + [ln if ln.startswith("#") or not ln.strip() else "    " + ln
                                 for ln in rest])


def _a_piece(s: Source, lp: Loop) -> bool:
    """A loop an earlier split made (its range ends at a `kc_lo`/`kc_hi`): its tests are
    decided already, or it is the part before or after the range, which stays as written."""
    ends = [x for x in (lp.start, lp.end) if x is not None]
    return any(n.type == "identifier" and n.text.decode().startswith(("kc_lo", "kc_hi"))
               for e in ends for n in walk(e))


MAX_TEXT = 96_000  # the function's text the copies may grow it to, at most
MAX_DEPTH = 3  # loops of one nest split, innermost first


def split_ranges(src: str, entry: str) -> str | None:
    """Each loop of `entry` whose body tests its counter against bounds, run as the ranges
    where the tests are decided: the innermost loops first, then the loops around them
    (`y == 0` tested inside the loop over x), whose body is copied with the split inner
    loops in it, while the function stays under MAX_TEXT characters."""
    out = None
    for _depth in range(MAX_DEPTH):
        got = model_of(out or src, entry)
        if got is None:
            break
        s, m = got
        sites = {lp.node.start_byte: (lp, site) for lp in m.loops
                 if not _a_piece(s, lp) and (site := _site(s, m.fn, lp)) is not None}
        # the deepest sites only: a split loop's copies hold the loops inside it as they are
        deepest = [(lp, site) for lp, site in sites.values()
                   if not any(within(other.node, lp.node) and other is not lp
                              for other, _ in sites.values())]
        edits = [Edit(lead_start(s, lp.node), lp.node.end_byte, _pieces(s, m, lp, *site))
                 for lp, site in deepest]
        new = finish(s, edits) if edits else None
        if new is None:
            break
        fn_after = model_of(new, entry)
        if fn_after is None or len(fn_after[0].text_of(fn_after[1].fn)) > MAX_TEXT:
            break
        out = new
    return out
