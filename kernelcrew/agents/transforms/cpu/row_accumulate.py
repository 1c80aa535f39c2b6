"""Row accumulators: a strip of outputs accumulated at once, the reduction outside.

Convolutions and filters are often written one output at a time: for each output pixel a
short reduction nest over channels and taps, the padding checked per tap.

    for (ox = 0; ox < w; ox++) {
        float sum = 0.0f;
        for (c...) for (ky...) for (kx = 0; kx < 3; kx++) {
            int ix = ox + kx - 1;
            if (iy < 0 || iy >= h || ix < 0 || ix >= w) continue;
            sum += img[(c * h + iy) * w + ix] * f[(c * 3 + ky) * 3 + kx];
        }
        out[oy * w + ox] = bias + sum;
    }

The innermost loop runs three times and cannot be vectorized; the pixel loop, which could,
holds the whole nest and a branch per tap. Here the pixel loop goes innermost: a strip of
STRIP outputs gets an accumulator array, the reduction nest runs once per strip, and for
each tap one unit-stride loop over the strip adds the tap's product into every
accumulator; the tests on the pixel's offset (`ix < 0`, `ix >= w`) become that loop's
bounds; the statements after the nest run over the strip at the end:

    for (ox0 = 0; ox0 < w; ox0 += STRIP) {
        int ox1 = min(ox0 + STRIP, w);
        float acc[STRIP];
        for (ox = ox0; ox < ox1; ox++) acc[ox - ox0] = 0.0f;
        for (c...) for (ky...) for (kx...) {
            if (iy < 0 || iy >= h) continue;
            int lo = max(ox0, 0 - (kx - 1)), hi = min(ox1, w - (kx - 1));
            #pragma omp simd
            for (ox = lo; ox < hi; ox++) { int ix = ox + kx - 1; acc[ox - ox0] += ...; }
        }
        for (ox = ox0; ox < ox1; ox++) out[oy * w + ox] = bias + acc[ox - ox0];
    }

Every output's sum is formed from the same terms in the same order (only a multiply-add
the compiler contracts in one version and not the other can round differently). Legal when: the pixel loop's body is the accumulator's declaration,
the reduction nest and statements after it; the nest writes nothing but its own locals
and the accumulator (`s += E` once, in the innermost body, whose other statements are
declarations and `if (...) continue;` tests, or the update guarded by `if (...)`); its
loops' bounds do not depend on the pixel; the statements after it write no array the nest
reads; every test that depends on the pixel compares the pixel plus an offset with a
value that does not. Offered where the innermost loop of the nest runs a short constant
count (the compiler unrolls it whole, nothing to vectorize there), or, where the nest tests
the pixel's offset (a padded or causal filter), a count fixed before the pixel loop (`k <
K`, a filter width known at run time: the test in the tap loop keeps it from vectorizing,
however long it is, while each strip pass is a plain unit-stride loop), or a count fixed
before the pixel loop whose body reads an array down its columns (`A[j][i]`, `data[k][j]`:
strided along the reduction, unit-stride along the pixel; the strip turns each column
read into a row read, the outer-loop vectorization of a transposed mat-vec or of a
covariance's column products); and every array the nest reads is read with unit stride
or not at all along the pixel loop.
"""

from __future__ import annotations

from kernelcrew.agents.transforms.analysis.common import (
    MIN_INNER,
    assignment,
    constant_trip,
    finish,
    fixed_text,
    fresh_name,
    has_pragma,
    in_as_was,
    in_small_path,
    invariant_text,
    model_of,
    repeat,
    statements,
)
from kernelcrew.agents.transforms.analysis.dependence import PURE_CALLS
from kernelcrew.agents.transforms.analysis.types import resolve
from kernelcrew.agents.transforms.reasons import per_entry
from kernelcrew.agents.transforms.views import canonical
from kernelcrew.csource.affine import split_terms
from kernelcrew.csource.syntax import Edit, Loop, Node, Source, declarators, unparen, walk
from kernelcrew.kernels.kernelfile import KernelFile

MARK = "// kernelcrew: row accumulators"
STRIP = 256  # outputs per strip: a float strip is 1 KB, in L1 with the rows it reads

_FLIP = {"<": ">", "<=": ">=", ">": "<", ">=": "<="}
_NEGATE = {"<": ">=", "<=": ">", ">": "<=", ">=": "<"}


def _mentions(n: Node | None, names: set[str]) -> bool:
    return n is not None and any(c.type == "identifier" and c.text.decode() in names
                                 for c in walk(n))


def _terms(n: Node, sign: int = 1) -> list[tuple[int, Node]]:
    """A +/- chain as signed terms (through parentheses)."""
    n = unparen(n)
    if n.type == "binary_expression":
        op = n.child_by_field_name("operator").type
        if op in ("+", "-"):
            return (_terms(n.child_by_field_name("left"), sign)
                    + _terms(n.child_by_field_name("right"), sign if op == "+" else -sign))
    return [(sign, n)]


def _join(s: Source, terms: list[tuple[int, Node]], extra: str = "") -> str:
    parts = [extra] if extra else []
    for sign, t in terms:
        text = s.text_of(t).strip()
        if t.type not in ("identifier", "number_literal"):
            text = f"({text})"
        parts.append(("- " if sign < 0 else "+ ") + text if parts else
                     ("-" + text if sign < 0 else text))
    return "(" + " ".join(parts) + ")" if parts else "0"


class _Nest:
    """What is known about one candidate: the pixel variable and its dependent locals."""

    def __init__(self, s: Source, x: str):
        self.s, self.x = s, x
        self.offsets: dict[str, str] = {}  # local -> its offset d (local = x + d)
        self.dep: set[str] = {x}  # x and the locals that depend on it

    def offset(self, n: Node) -> str | None:
        """`n` is x + d (x, or a local x + d', once, with a + sign; nothing else depends on
        x): the text of d; None otherwise."""
        terms = _terms(n)
        hits = [(sg, t) for sg, t in terms if t.type == "identifier" and t.text.decode() in
                self.dep]
        if len(hits) != 1 or hits[0][0] != 1:
            return None
        name = hits[0][1].text.decode()
        if name != self.x and name not in self.offsets:
            return None
        rest = [(sg, t) for sg, t in terms if t is not hits[0][1]]
        if any(_mentions(t, self.dep) for _, t in rest):
            return None
        return _join(self.s, rest, self.offsets.get(name, ""))

    def keep_bounds(self, cond: Node, negate: bool) -> tuple[list[str], list[str], list[str]]:
        """(lower bounds, upper bounds, independent terms) of the x range in which `cond` (a
        comparison) holds (or fails, `negate`); raises ValueError where it cannot tell."""
        c = unparen(cond)
        if not _mentions(c, self.dep):
            return [], [], [self.s.text_of(c)]
        if c.type != "binary_expression":
            raise ValueError
        op = c.child_by_field_name("operator").type
        left, right = c.child_by_field_name("left"), c.child_by_field_name("right")
        if op not in _FLIP:
            raise ValueError
        if _mentions(right, self.dep):
            if _mentions(left, self.dep):
                raise ValueError
            left, right, op = right, left, _FLIP[op]
        if negate:
            op = _NEGATE[op]
        d = self.offset(left)
        if d is None:
            raise ValueError
        r = self.s.text_of(right).strip()
        edge = f"({r}) - {d}"
        # x + d op r, kept: a bound on x
        if op == "<":
            return [], [edge], []
        if op == "<=":
            return [], [f"{edge} + 1"], []
        if op == ">":
            return [f"{edge} + 1"], [], []
        return [edge], [], []


def _chain(n: Node, op: str) -> list[Node]:
    n = unparen(n)
    if n.type == "binary_expression" and n.child_by_field_name("operator").type == op:
        return _chain(n.child_by_field_name("left"), op) + \
            _chain(n.child_by_field_name("right"), op)
    return [n]


def _update(stmt: Node, acc: str) -> Node | None:
    """`acc += E;` or `acc = acc + E;` -> E."""
    if (got := assignment(stmt, "+=")) is not None:
        left, right = got
    elif (got := assignment(stmt, "=")) is not None:
        left, r = got[0], unparen(got[1])
        if r.type != "binary_expression" or r.child_by_field_name("operator").type != "+":
            return None
        a, right = r.child_by_field_name("left"), r.child_by_field_name("right")
        if a.type != "identifier" or a.text.decode() != acc:
            return None
    else:
        return None
    return right if left.type == "identifier" and left.text.decode() == acc else None


def _pure(s: Source, n: Node, allow_reads: bool) -> bool:
    """No call but pure math, no write, and (unless allowed) no memory read."""
    for c in walk(n):
        if c.type == "call_expression":
            if s.text_of(c.child_by_field_name("function")).strip() not in PURE_CALLS:
                return False
        elif c.type in ("assignment_expression", "update_expression") or (
                c.type in ("subscript_expression", "pointer_expression") and not allow_reads):
            return False
    return True


def _roots(m, n: Node, writes: bool) -> set[str]:
    """The buffers (parameters or local arrays, seen through row pointers and casts) that
    `n` reads (or writes) through subscripts and derefs; "?" for one it cannot trace."""
    targets = {c.child_by_field_name("left").start_byte for c in walk(n)
               if c.type == "assignment_expression"}
    out = set()
    for c in walk(n):
        if c.type in ("subscript_expression", "pointer_expression") and \
                (c.start_byte in targets) == writes:
            if c.type == "pointer_expression" and \
                    c.child_by_field_name("operator").type != "*":
                continue
            if c.type == "subscript_expression":
                if c.parent is not None and c.parent.type == "subscript_expression" and \
                        c.parent.child_by_field_name("argument") == c:
                    continue  # the row `A[j]` of `A[j][i]`: the whole access is counted
                got = m.subscript(c, n)  # `A[j][i]` of a 2D array parameter
                out.add(got[0] if got is not None else "?")
                continue
            base = c.child_by_field_name("argument")
            root = m.pointer_root(base, n) if base is not None else None
            out.add(root[0] if root is not None else "?")
    return out


def _chain_of_loops(top: Loop) -> list[Loop] | None:
    """The reduction nest as a chain of perfectly nested loops (outermost first)."""
    out = [top]
    while out[-1].children:
        lp = out[-1]
        if len(lp.children) != 1 or statements(lp.body) != [lp.children[0].node]:
            return None
        out.append(lp.children[0])
    return out


def _plan(s: Source, m, xl: Loop) -> tuple[str | None, dict]:
    """Why the pixel loop `xl` cannot be accumulated a strip at a time, or (None, what the
    rewrite needs). The steps, each refusing with a reason: the pixel loop's header, the
    accumulator's declaration, the reduction nest's chain of loops, its innermost body,
    the update, the statements after the nest."""
    line = s.line_of(xl.node)
    why = _header_reason(s, xl, line)
    if why is not None:
        return why, {}
    got = _accumulator(s, xl, line)
    if isinstance(got, str):
        return got, {}
    lead, body, lead_names, acc, init, ftype = got
    got = _reduction_chain(s, m, xl, body, acc, line)
    if isinstance(got, str):
        return got, {}
    red, chain, inner, runtime = got
    x = xl.var
    nest = _Nest(s, x)
    got = _innermost_body(s, inner, acc, nest, x)
    if isinstance(got, str):
        return got, {}
    before, dep_decls, lows, highs, update = got
    why = _update_reason(s, m, inner, acc, nest, x, update, runtime, lows, highs, chain)
    if why is None:
        why = _tail_reason(s, m, red, body, acc, line)
    if why is not None:
        return why, {}
    tail = body[2:]
    # fixed while the pixel loop runs (a triangular nest's `j = i` start included)
    start, end = fixed_text(s, m, xl.start, xl.node), fixed_text(s, m, xl.end, xl.node)
    if start is None or end is None or _mentions(init, {acc}) or \
            not _pure(s, init, allow_reads=True):
        return f"loop at line {line}: bounds or the accumulator's value change inside it", {}
    if _mentions(init, lead_names):
        return f"loop at line {line}: the accumulator's value uses {sorted(lead_names)}", {}
    return None, {"acc": acc, "init": init, "ftype": ftype, "chain": chain,
                  "lead": [s.text_of(st).strip() for st in lead],
                  "before": before, "dep_decls": dep_decls, "lows": lows, "highs": highs,
                  "update": update, "tail": tail, "start": start, "end": end,
                  "runtime": runtime}


def _header_reason(s: Source, xl: Loop, line: int) -> str | None:
    """The pixel loop: a unit-step `<` loop that declares its counter, under no OpenMP
    pragma."""
    if not xl.canonical or xl.step is not None or xl.inclusive or xl.node.type != "for_statement":
        return f"loop at line {line} is not a unit-step `<` loop"
    init = xl.node.child_by_field_name("initializer")
    if init is None or init.type != "declaration":
        # the strips declare their own counters: a counter declared outside would keep
        # its value from before the loop (the view with counters in their loops applies)
        return f"loop at line {line} does not declare its counter"
    if has_pragma(s, xl, r"^omp\b"):
        return f"loop at line {line} carries an OpenMP pragma"
    return None


def _accumulator(s: Source, xl: Loop, line: int
                 ) -> str | tuple[list[Node], list[Node], set[str], str, Node, str]:
    """The pixel loop's body as (declarations before the accumulator, the rest, their
    names, the accumulator, its initial value, its type): `acc = init; nest; uses`."""
    body = statements(xl.body)
    # declarations before the accumulator's (an output index, a row pointer) are repeated
    # where the statements after the nest run; the nest may not use them
    k = 0
    while k + 1 < len(body) and body[k].type == "declaration" and \
            body[k + 1].type == "declaration":
        k += 1
    lead, body = body[:k], body[k:]
    if len(body) < 3 or body[0].type != "declaration" or body[1].type != "for_statement":
        return (f"loop at line {line} is not `acc = init; reduction nest; use of acc`")
    lead_names = {n for st in lead for n, _, _, _ in declarators(st)}
    for st in lead:
        if not _pure(s, st, allow_reads=True) or _mentions(body[1], lead_names):
            return (f"line {s.line_of(st)}: a declaration before the accumulator that the "
                    "nest uses or that has an effect")
    ds = list(declarators(body[0]))
    if len(ds) != 1 or ds[0][1] is None or ds[0][2]:
        return f"loop at line {line}: the accumulator is not one scalar with a value"
    acc, init = ds[0][0], ds[0][1]
    ftype = s.text_of(body[0].child_by_field_name("type")).strip()
    if resolve(s, ftype) not in ("float", "double"):
        return f"loop at line {line}: the accumulator {acc} is not float or double"
    return lead, body, lead_names, acc, init, ftype


def _reduction_chain(s: Source, m, xl: Loop, body: list[Node], acc: str, line: int
                     ) -> str | tuple[Loop, list[Loop], Loop, str | None]:
    """The reduction nest after the accumulator: (its outer loop, its chain of perfectly
    nested loops, the innermost, the innermost's count when known only at run time). Its
    bounds may not depend on the pixel, and its innermost loop must run a short constant
    count or one fixed before the pixel loop: otherwise it vectorizes as it is."""
    red = next((lp for lp in xl.children if lp.node.start_byte == body[1].start_byte), None)
    chain = _chain_of_loops(red) if red is not None else None
    if chain is None:
        return f"loop at line {line}: the reduction is not one perfectly nested loop chain"
    x = xl.var
    for lp in chain:  # copied as they are: any countable header
        if not lp.canonical:
            return f"loop at line {s.line_of(lp.node)} is not a countable loop"
        if any(_mentions(n, {x, acc}) for n in (lp.start, lp.end)):
            return f"the bounds of the loop at line {s.line_of(lp.node)} depend on {x}"
        if has_pragma(s, lp, r"^omp\b"):
            return f"loop at line {s.line_of(lp.node)} carries an OpenMP pragma"
    inner = chain[-1]
    trip = constant_trip(s, m, inner)
    runtime = None  # a count known only at run time (`k < K`)
    if trip is None and inner.step is None:
        lo_t = invariant_text(s, m, inner.start, xl.node)
        hi_t = invariant_text(s, m, inner.end, xl.node)
        if lo_t is not None and hi_t is not None:
            runtime = f"({hi_t}) - ({lo_t})" + (" + 1" if inner.inclusive else "")
    if (trip is None and runtime is None) or (trip is not None and trip >= MIN_INNER):
        return (f"the innermost loop of the nest at line {s.line_of(inner.node)} is not a short "
                "constant loop nor one fixed before the pixel loop (it can be vectorized as it "
                "is)")
    return red, chain, inner, runtime


def _innermost_body(s: Source, inner: Loop, acc: str, nest: _Nest, x: str
                    ) -> str | tuple[list[str], list[str], list[str], list[str], Node]:
    """The innermost body: declarations, tests on the pixel's offset (which become the
    strip loop's bounds) and one update of the accumulator, as (independent statements,
    declarations that depend on the pixel, lower bounds, upper bounds, the update's
    added term)."""
    before: list[str] = []  # independent statements, in order
    dep_decls: list[str] = []
    lows: list[str] = []
    highs: list[str] = []
    update: Node | None = None
    seen_dep = False
    for st in statements(inner.body):
        if update is not None:
            return f"line {s.line_of(st)}: a statement after the update of {acc}"
        if st.type == "declaration":
            names = list(declarators(st))
            if not _pure(s, st, allow_reads=True) or any(v is None or ptr for _, v, ptr, _ in
                                                         names) or _mentions(st, {acc}):
                return f"line {s.line_of(st)}: a declaration the rewrite cannot move"
            if _mentions(st, nest.dep):
                if len(names) != 1:
                    return f"line {s.line_of(st)}: several locals that depend on {x}"
                name, value = names[0][0], names[0][1]
                d = nest.offset(value)
                if d is not None:
                    nest.offsets[name] = d
                nest.dep.add(name)
                dep_decls.append(s.text_of(st).strip())
                seen_dep = True
            else:
                if seen_dep and not _pure(s, st, allow_reads=False):
                    return (f"line {s.line_of(st)}: a read of memory after a test on {x} "
                            "(it would move before the test)")
                before.append(s.text_of(st).strip())
            continue
        if st.type == "if_statement":
            cond = st.child_by_field_name("condition")
            cons = st.child_by_field_name("consequence")
            if st.child_by_field_name("alternative") is not None or cond is None:
                return f"line {s.line_of(st)}: an if with an else"
            cond_expr = cond.named_children[-1] if cond.named_children else None
            if cond_expr is None or _mentions(cond_expr, {acc}) or \
                    not _pure(s, cond_expr, allow_reads=True):
                return f"line {s.line_of(st)}: a test the rewrite cannot read"
            inner_st = statements(cons)
            is_skip = len(inner_st) == 1 and inner_st[0].type == "continue_statement"
            guarded = _update(inner_st[0], acc) if len(inner_st) == 1 else None
            if not is_skip and guarded is None:
                return f"line {s.line_of(st)}: an if that is neither a skip nor the update"
            terms = _chain(cond_expr, "||" if is_skip else "&&")
            indep: list[str] = []
            try:
                for t in terms:
                    lo, hi, ind = nest.keep_bounds(t, negate=is_skip)
                    lows += lo
                    highs += hi
                    indep += ind
            except ValueError:
                return (f"line {s.line_of(st)}: a test on {x} that is not the pixel plus an "
                        "offset against a bound")
            if indep:
                glue = " || " if is_skip else " && "
                joined = glue.join(f"({t})" for t in indep)
                before.append(f"if ({joined}) continue;" if is_skip else
                              f"if (!({joined})) continue;")
            if guarded is not None:
                update = guarded
            seen_dep = seen_dep or bool(lows or highs)
            continue
        e = _update(st, acc)
        if e is None:
            return f"line {s.line_of(st)}: a statement other than a declaration, test or update"
        update = e
    if update is None:
        return f"the innermost loop at line {s.line_of(inner.node)} does not update {acc}"
    return before, dep_decls, lows, highs, update


def _update_reason(s: Source, m, inner: Loop, acc: str, nest: _Nest, x: str, update: Node,
                   runtime: str | None, lows: list[str], highs: list[str], chain: list[Loop]
                   ) -> str | None:
    """The update reads the accumulator nowhere else and calls nothing impure, depends on
    the pixel, and reads every array with unit stride (or not at all) along it; the nest
    writes nothing outside its innermost body and does not jump out."""
    if runtime is not None and not (lows or highs) and not _column_read(m, chain, x, update):
        # a count known at run time, no test on the pixel and no column read: a long one
        # vectorizes as it is (a dot product), and a short one cannot be told from a long
        # one here
        return (f"the innermost loop of the nest at line {s.line_of(inner.node)} runs a count "
                f"known at run time, tests nothing on {x} and reads no array down its "
                "columns (it can be vectorized as it is)")
    if _mentions(update, {acc}) or not _pure(s, update, allow_reads=True):
        return f"the update of {acc} reads {acc} again or calls a function"
    if not _mentions(update, nest.dep):
        return f"the update of {acc} does not depend on {x} (the same sum for every {x})"
    # every array read with unit stride or invariantly along x
    for n in walk(update):
        if n.type == "subscript_expression":
            idx = n.child_by_field_name("indices") or n.child_by_field_name("index")
            idx = idx.named_children[0] if idx is not None and idx.type == \
                "subscript_argument_list" and idx.named_children else idx
            if idx is not None and _mentions(idx, nest.dep) and nest.offset(idx) is None:
                return (f"line {s.line_of(n)}: {s.text_of(n)} is not read with unit stride "
                        f"along {x}")
        elif n.type == "pointer_expression" and _mentions(n, nest.dep):
            return f"line {s.line_of(n)}: a dereference that depends on {x}"
    # nothing else in the nest writes or reads the accumulator
    headers = [(lp.node.start_byte, lp.body.start_byte) for lp in chain]
    for lp in chain:
        for n in walk(lp.body):
            if n.type in ("assignment_expression", "update_expression") and \
                    n.start_byte < inner.body.start_byte and \
                    not any(a <= n.start_byte < b for a, b in headers):
                return f"line {s.line_of(n)}: the nest writes outside its innermost body"
            if n.type in ("break_statement", "return_statement", "goto_statement"):
                return f"line {s.line_of(n)}: a jump out of the nest"
    return None


def _column_read(m, chain: list[Loop], x: str, update: Node) -> bool:
    """The update reads an array down its columns: a subscript with unit stride along the
    pixel `x` that strides (by more than one element) along the innermost loop of the
    nest, so the strip reads rows where the code as written reads columns."""
    inner = chain[-1]
    xl = chain[0].parent
    if xl is None or xl.var != x:
        return False
    for n in walk(update):
        if n.type != "subscript_expression":
            continue
        got = m.subscript(n, xl.node)
        sp = split_terms(got[1]) if got is not None and got[1] is not None else None
        if sp is None:
            continue
        along_x, along_k = sp[0].get(xl.key), sp[0].get(inner.key)
        if along_x == {(): 1} and along_k is not None and along_k != {(): 1}:
            return True
    return False


def _tail_reason(s: Source, m, red: Loop, body: list[Node], acc: str, line: int
                 ) -> str | None:
    """The statements after the nest: repeatable over the strip (pure, or one store), no
    declaration, no write to an array the nest reads, and some use of the accumulator."""
    tail = body[2:]
    read = _roots(m, red.node, writes=False)
    for st in tail:
        if not _pure(s, st, allow_reads=True) and not (
                st.type == "expression_statement" and _single_store(s, st)):
            return f"line {s.line_of(st)}: after the nest, a statement the rewrite cannot repeat"
        written = _roots(m, st, writes=True)
        if written & read or "?" in written | read:
            return f"line {s.line_of(st)}: writes an array the reduction nest reads"
        if st.type == "declaration":
            return f"line {s.line_of(st)}: a declaration after the nest"
    if not any(_mentions(st, {acc}) for st in tail):
        return f"loop at line {line}: {acc} is not used after the nest"
    return None


def _single_store(s: Source, st: Node) -> bool:
    """`target[...] = expr;` (or `*p = expr;`) with a pure right side."""
    e = st.named_children[0] if st.named_children else None
    if e is None or e.type != "assignment_expression":
        return False
    left = e.child_by_field_name("left")
    return left.type in ("subscript_expression", "pointer_expression") and \
        _pure(s, e.child_by_field_name("right"), allow_reads=True) and \
        _pure(s, left.child_by_field_name("argument") or left, allow_reads=True)


def _rewrite(s: Source, m, xl: Loop, p: dict) -> str | None:
    x = xl.var
    ctype = s.text_of(xl.node.child_by_field_name("initializer")
                      .child_by_field_name("type")).strip()
    x0 = fresh_name(m, f"{x}_strip")
    x1 = fresh_name(m, f"{x}_end")
    acc = fresh_name(m, f"{p['acc']}_row")
    lo, hi = fresh_name(m, f"{x}_lo"), fresh_name(m, f"{x}_hi")
    ind = s.indent_of(xl.node)
    step = "    "

    def at(level: int, text: str) -> str:
        return ind + step * level + text

    name = p["acc"]
    slot = f"{acc}[{x} - {x0}]"

    def swap_acc(node: Node) -> str:
        text, base = s.text_of(node), node.start_byte
        edits = [(i.start_byte - base, i.end_byte - base) for i in walk(node)
                 if i.type == "identifier" and i.text.decode() == name]
        for a, b in sorted(edits, reverse=True):
            text = text[:a] + slot + text[b:]
        return text

    lines = [
        at(0, f"for ({ctype} {x0} = {p['start']}; {x0} < {p['end']}; {x0} += {STRIP}) {{  "
              f"{MARK}"),
        at(1, f"const {ctype} {x1} = ({p['end']}) - {x0} > {STRIP} ? {x0} + {STRIP} : "
              f"({p['end']});"),
        at(1, f"{p['ftype']} {acc}[{STRIP}];"),
        at(1, f"for ({ctype} {x} = {x0}; {x} < {x1}; {x}++) {slot} = {s.text_of(p['init'])};"),
    ]
    chain: list[Loop] = p["chain"]
    for k, lp in enumerate(chain):
        header = s.data[lp.node.start_byte:lp.body.start_byte].decode().rstrip()
        lines.append(at(1 + k, header + " {"))
    depth = 1 + len(chain)
    for text in p["before"]:
        lines.append(at(depth, text))
    lines.append(at(depth, f"{ctype} {lo} = {x0};"))
    for b in p["lows"]:
        lines.append(at(depth, f"if ({lo} < ({ctype})({b})) {lo} = ({ctype})({b});"))
    lines.append(at(depth, f"{ctype} {hi} = {x1};"))
    for b in p["highs"]:
        lines.append(at(depth, f"if ({hi} > ({ctype})({b})) {hi} = ({ctype})({b});"))
    lines.append(at(depth, "#pragma omp simd"))
    lines.append(at(depth, f"for ({ctype} {x} = {lo}; {x} < {hi}; {x}++) {{"))
    for text in p["dep_decls"]:
        lines.append(at(depth + 1, text))
    lines.append(at(depth + 1, f"{slot} += {s.text_of(p['update'])};"))
    lines.append(at(depth, "}"))
    for k in range(len(chain) - 1, -1, -1):
        lines.append(at(1 + k, "}"))
    lines.append(at(1, f"for ({ctype} {x} = {x0}; {x} < {x1}; {x}++) {{"))
    for text in p["lead"]:
        lines.append(at(2, text))
    for st in p["tail"]:
        lines.append(at(2, swap_acc(st)))
    lines.append(at(1, "}"))
    lines.append(at(0, "}"))
    start = s.line_start(xl.node)
    end = xl.node.end_byte
    return finish(s, [Edit(start, end, "\n".join(lines))])


def _once(s: Source, m) -> str | None:
    for lp in m.loops:
        if MARK in s.data[s.line_start(lp.node):lp.body.start_byte].decode():
            continue
        if in_small_path(lp.node) or in_as_was(lp.node):
            continue  # code kept as it was for sizes or cases another rewrite leaves
        why, plan = _plan(s, m, lp)
        if why is None:
            return _rewrite(s, m, lp, plan)
    return None


def row_accumulate(src: str, entry: str) -> str | None:
    """Row accumulators on every pixel loop of `entry` that takes them (see the module
    text); None where none does."""
    if MARK in src:
        return None
    return repeat(src, entry, _once)


def row_reasons(src: str, entry: str) -> list[str]:
    """Why no loop of `entry` takes row accumulators: one reason per loop that holds a
    nested loop (the candidates), at most four, on the code as written; then those of
    the most rewritten view of the function (counters scoped, helpers inlined,
    accumulators kept in locals), the form the move is tried on last, that differ."""
    out: list[str] = []
    for text, cap in ((src, 4), (canonical(src, entry), 8)):
        got = model_of(text, entry)
        if got is None:
            continue
        s, m = got
        for lp in m.loops:
            if not lp.children:
                continue
            why, _ = _plan(s, m, lp)
            if why is not None and why not in out and len(out) < cap:
                out.append(why)
    return out


def why_not(kf: KernelFile) -> str:
    return per_entry(kf, row_reasons, "no per-output reduction nest in a loop")
