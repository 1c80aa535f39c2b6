"""Affine forms on the syntax tree: subscripts and pointer offsets as polynomials over the
loop variables and loop-invariant symbols (`i*cols + j` -> {i: cols, j: 1}), loop bounds,
and the mixed-radix digits that prove an offset one-to-one.

This is the one C subscript linearizer of the package: the moves' dependence analysis
(`agents.transforms.analysis.dependence`) and the profiler's strides
(`tools.observe.cpu_source`) both read subscripts through `FunctionModel`, so they cannot
disagree about a stride.

An offset is one-to-one across the iterations of a loop nest when it is a mixed-radix
number whose digits are loop variables within their bounds (j in [0, cols) with weight 1,
i with weight cols, ...). `dependence` builds the legality checks on top of this.
"""

from __future__ import annotations

from kernelcrew.csource.syntax import (
    Decl,
    Loop,
    Node,
    Source,
    all_loops,
    array_dims,
    lookup,
    loops_in,
    params,
    walk,
    within,
)

Mono = tuple[str, ...]
Poly = dict[Mono, int]

ONE: Poly = {(): 1}
VAR_MARK = "@"  # loop-variable symbols are "name@offset"; invariant symbols are plain names
def p_add(a: Poly, b: Poly, sign: int = 1) -> Poly:
    out = dict(a)
    for m, c in b.items():
        out[m] = out.get(m, 0) + sign * c
        if out[m] == 0:
            del out[m]
    return out


def p_mul(a: Poly, b: Poly) -> Poly:
    out: Poly = {}
    for ma, ca in a.items():
        for mb, cb in b.items():
            m = tuple(sorted(ma + mb))
            out[m] = out.get(m, 0) + ca * cb
            if out[m] == 0:
                del out[m]
    return out


def p_binary(op: str, a: Poly | None, b: Poly | None) -> Poly | None:
    """`a op b` for `+`, `-` and `*`; None for any other operator or a side unknown."""
    if a is None or b is None:
        return None
    if op == "+":
        return p_add(a, b)
    if op == "-":
        return p_add(a, b, -1)
    return p_mul(a, b) if op == "*" else None


def p_sym(name: str) -> Poly:
    return {(name,): 1}


def p_str(p: Poly) -> str:
    if not p:
        return "0"
    terms = []
    for m, c in sorted(p.items()):
        names = [s.split(VAR_MARK)[0] for s in m]
        t = "*".join(names)
        if not t:
            terms.append(str(c))
        elif c == 1:
            terms.append(t)
        else:
            terms.append(f"{c}*{t}")
    return " + ".join(terms)


def p_derivative(p: Poly, sym: str) -> Poly | None:
    """d p / d sym: the change of `p` per unit step of the symbol (a loop variable's key:
    the stride of a subscript in that loop). None when the symbol appears squared."""
    out: Poly = {}
    for m, c in p.items():
        n = m.count(sym)
        if n > 1:
            return None
        if n == 1:
            rest = list(m)
            rest.remove(sym)
            out = p_add(out, {tuple(sorted(rest)): c})
    return out


def p_plain(p: Poly) -> Poly:
    """The polynomial with loop-variable symbols (`name@pos`) written by their names, as a
    reader (or a table of the case's values) knows them."""
    out: Poly = {}
    for m, c in p.items():
        out = p_add(out, {tuple(sorted(s.split(VAR_MARK)[0] for s in m)): c})
    return out


def int_literal(text: str) -> int | None:
    t = text.rstrip("uUlL")
    try:
        return int(t, 0)
    except ValueError:
        return None


_INT_TYPES = ("int", "long", "int64_t", "int32_t", "size_t", "ptrdiff_t", "unsigned", "short",
              "long long", "uint64_t", "uint32_t", "long int")


def _base_type(text: str) -> str:
    """`const float *` -> `float`."""
    words = text.replace("*", " ").split()
    return " ".join(w for w in words if w not in ("const", "volatile", "restrict",
                                                   "__restrict__", "__restrict"))


def pointer_element_type(src: Source, node: Node | None) -> str | None:
    """The element type of a pointer variable (`float` for `const float* x`), else None."""
    while node is not None and node.type == "parenthesized_expression" and \
            len(node.named_children) == 1:
        node = node.named_children[0]
    if node is None or node.type != "identifier":
        return None
    d = lookup(node.text.decode(), node)
    if d is None or not (d.pointer or d.array):
        return None
    ty = d.node.child_by_field_name("type")
    return _base_type(src.text_of(ty)) if ty is not None else None


class FunctionModel:
    """One function's loops and declarations, with the queries the transforms need.

    `expand_locals`: a local declared outside the region asked about, with an initializer
    and never assigned again, reads as its initializer's form rather than as a symbol of
    its own (`int n = (int)n_;` reads as n_): the profiler asks this, to evaluate a stride
    from the entry's sizes. The moves keep such locals as symbols (the names the code's
    bounds use)."""

    def __init__(self, src: Source, fn: Node, *, expand_locals: bool = False):
        self.src = src
        self.fn = fn
        self.expand_locals = expand_locals
        self.body = fn.child_by_field_name("body")
        self.forest = loops_in(self.body)
        self.loops = all_loops(self.forest)
        self._by_decl = {lp.decl.start_byte: lp for lp in self.loops
                         if lp.decl is not None and lp.decl.type == "declaration"
                         and lp.decl.parent is not None and lp.decl.parent.type == "for_statement"}
        self.written = self._written_decls()

    # -- declarations

    def loop_of_decl(self, d: Decl, use: Node | None = None) -> Loop | None:
        """The loop whose induction variable `d` is; for a variable declared before
        `for (i = 0; ...)`, the innermost such loop around `use`."""
        lp = self._by_decl.get(d.node.start_byte)
        if lp is not None and lp.var == d.name:
            return lp
        found = None
        for lp in self.loops:
            if lp.var == d.name and lp.decl is not None and \
                    lp.decl.start_byte == d.node.start_byte and use is not None and \
                    within(use, lp.node):
                found = lp  # preorder: later matches are nested deeper
        return found

    def _written_decls(self) -> set[str]:
        out = set()
        for n in walk(self.body):
            target = None
            if n.type == "assignment_expression":
                target = n.child_by_field_name("left")
            elif n.type == "update_expression":
                target = n.child_by_field_name("argument")
            if target is not None and target.type == "identifier":
                d = lookup(target.text.decode(), target)
                if d is not None:
                    out.add(d.key)
        return out

    def is_written(self, d: Decl) -> bool:
        return d.key in self.written

    # -- affine forms

    def linear(self, node: Node | None, region: Node, depth: int = 0) -> Poly | None:
        """The expression as a polynomial; loop variables of loops inside `region` become
        `name@pos` symbols, invariant names stay plain. None when not affine-like."""
        if node is None or depth > 12:
            return None
        t = node.type
        if t == "number_literal":
            v = int_literal(node.text.decode())
            return None if v is None else ({(): v} if v else {})
        if t == "identifier":
            return self._ident(node, region, depth)
        if t == "parenthesized_expression":
            inner = node.named_children
            return self.linear(inner[0], region, depth + 1) if len(inner) == 1 else None
        if t == "cast_expression":
            ty = self.src.text_of(node.child_by_field_name("type"))
            if ty.strip() not in _INT_TYPES:
                return None
            return self.linear(node.child_by_field_name("value"), region, depth + 1)
        if t == "unary_expression":
            op = node.child_by_field_name("operator").type
            arg = self.linear(node.child_by_field_name("argument"), region, depth + 1)
            if arg is None or op not in ("-", "+"):
                return None
            return arg if op == "+" else p_add({}, arg, -1)
        if t == "binary_expression":
            op = node.child_by_field_name("operator").type
            return p_binary(op, self.linear(node.child_by_field_name("left"), region, depth + 1),
                            self.linear(node.child_by_field_name("right"), region, depth + 1))
        return None

    def _ident(self, node: Node, region: Node, depth: int) -> Poly | None:
        name = node.text.decode()
        d = lookup(name, node)
        if d is None:
            return p_sym(name)  # a macro or knob such as TILE: invariant
        lp = self.loop_of_decl(d, node)
        if lp is not None and within(lp.node, region):
            return p_sym(lp.key)
        if within(d.node, region) and not d.param:
            # a local of the region: substitute its initializer when it is never re-assigned
            if d.init is None or self.is_written(d) or d.pointer:
                return None
            return self.linear(d.init, region, depth + 1)
        if lp is not None:
            return p_sym(lp.key)  # an enclosing loop's variable: fixed inside the region
        if self.expand_locals and not d.param and not d.pointer and not d.array and \
                d.init is not None and not self.is_written(d):
            got = self.linear(d.init, region, depth + 1)
            if got is not None:
                return got
        return p_sym(name)

    def pointer_root(self, node: Node, region: Node, depth: int = 0
                     ) -> tuple[str, Poly | None] | None:
        """(root, offset) of a pointer expression: a parameter or local array plus an offset."""
        if depth > 8:
            return None
        t = node.type
        if t == "parenthesized_expression" and len(node.named_children) == 1:
            return self.pointer_root(node.named_children[0], region, depth + 1)
        if t == "cast_expression":  # `(float*)x`: the same buffer, the same elements
            value = node.child_by_field_name("value")
            to = _base_type(self.src.text_of(node.child_by_field_name("type")))
            have = pointer_element_type(self.src, value)
            if have == "void" and "*" in self.src.text_of(node.child_by_field_name("type")):
                # `(const BYTE*)src` of a `const void* src`: its elements are the cast's,
                # as long as the function reads the buffer as one type only
                if self._void_views(value) != {to}:
                    return None
            elif to != have:
                return None
            return self.pointer_root(value, region, depth + 1)
        if t == "identifier":
            d = lookup(node.text.decode(), node)
            if d is None:
                return None
            if d.param or d.array:
                return d.key, {}
            if not d.pointer or d.init is None or self.is_written(d):
                return None
            return self.pointer_root(d.init, region, depth + 1)
        if t == "binary_expression":
            op = node.child_by_field_name("operator").type
            left, right = node.child_by_field_name("left"), node.child_by_field_name("right")
            if op in ("+", "-"):
                base = self.pointer_root(left, region, depth + 1)
                if base is not None:
                    off = self.linear(right, region)
                    if base[1] is None or off is None:
                        return base[0], None
                    return base[0], p_add(base[1], off, 1 if op == "+" else -1)
                if op == "+":
                    base = self.pointer_root(right, region, depth + 1)
                    if base is not None:
                        off = self.linear(left, region)
                        if base[1] is None or off is None:
                            return base[0], None
                        return base[0], p_add(base[1], off)
            return None
        if t == "pointer_expression" and node.child_by_field_name("operator").type == "&":
            arg = node.child_by_field_name("argument")
            if arg is not None and arg.type == "subscript_expression":
                acc = self.subscript(arg, region)
                if acc is not None:
                    return acc
        return None

    def _void_views(self, ident: Node) -> set[str]:
        """The element types a `void*` variable is cast to anywhere in the function."""
        d = lookup(ident.text.decode(), ident)
        out = set()
        for n in walk(self.fn):
            if n.type != "cast_expression":
                continue
            v = n.child_by_field_name("value")
            while v is not None and v.type == "parenthesized_expression" and v.named_children:
                v = v.named_children[0]
            if v is not None and v.type == "identifier" and d is not None and \
                    (e := lookup(v.text.decode(), v)) is not None and e.key == d.key:
                out.add(_base_type(self.src.text_of(n.child_by_field_name("type"))))
        return out

    def _chain(self, node: Node) -> tuple[Node, list[Node | None], list[Node | None]] | None:
        """`a[i][j]` on an array declared `T a[N][M]`: (a, [i, j], [N, M]); None for a
        single subscript or a chain that is not indexing a multi-dimensional array."""
        idxs: list[Node | None] = []
        b = node
        while b is not None and b.type == "subscript_expression":
            lst = b.child_by_field_name("indices")
            idxs.insert(0, lst.named_children[0] if lst is not None and lst.named_children
                        else None)
            b = b.child_by_field_name("argument")
        if len(idxs) < 2 or b is None or b.type != "identifier":
            return None
        d = lookup(b.text.decode(), b)
        dims = array_dims(d.node, d.name) if d is not None else None
        if dims is None or len(dims) != len(idxs) or any(x is None for x in dims[1:]):
            return None
        return b, idxs, dims

    def subscript_spans(self, node: Node, region: Node) -> dict[str, Poly]:
        """What the language bounds in `a[i][j]` of `T a[N][M]`: an index after the first
        that is a loop counter stays below its dimension (j < M), or the access is out of
        the array: {counter: dimension} for the mixed-radix digits of this access."""
        got = self._chain(node)
        if got is None:
            return {}
        out: dict[str, Poly] = {}
        for idx, dim in zip(got[1][1:], got[2][1:], strict=True):
            p = self.linear(idx, region)
            dp = self.linear(dim, region)
            if p is not None and dp is not None and len(p) == 1:
                (mono, c), = p.items()
                if c == 1 and len(mono) == 1 and VAR_MARK in mono[0]:
                    out[mono[0]] = dp
        return out

    def access(self, node: Node, region: Node) -> tuple[str, Poly | None] | None:
        """(root, offset) of a memory access: `base[index]` (see `subscript`) or `*ptr`
        (see `pointer_root`); None when its base is not a buffer the model can name."""
        if node.type == "subscript_expression":
            return self.subscript(node, region)
        if node.type == "pointer_expression" and \
                node.child_by_field_name("operator").type == "*":
            arg = node.child_by_field_name("argument")
            return self.pointer_root(arg, region) if arg is not None else None
        return None

    def subscript(self, node: Node, region: Node) -> tuple[str, Poly | None] | None:
        """(root, offset) of `base[index]`; `a[i][j]` of `T a[N][M]` is element i*M + j."""
        chain = self._chain(node)
        if chain is not None:
            b, idxs, dims = chain
            root = self.pointer_root(b, region)
            if root is None:
                return None
            off: Poly | None = root[1]
            for k, idx in enumerate(idxs):
                term = self.linear(idx, region)
                for dim in dims[k + 1:]:
                    dp = self.linear(dim, region)
                    term = None if term is None or dp is None else p_mul(term, dp)
                off = None if off is None or term is None else p_add(off, term)
            return root[0], off
        base = node.child_by_field_name("argument")
        idx_list = node.child_by_field_name("indices")
        idx = idx_list.named_children[0] if idx_list is not None and idx_list.named_children \
            else None
        root = self.pointer_root(base, region)
        if root is None:
            return None
        off = self.linear(idx, region)
        if root[1] is None or off is None:
            return root[0], None
        return root[0], p_add(root[1], off)

    # -- loop bounds

    def upper(self, lp: Loop, region: Node) -> Poly | None:
        """An exclusive upper bound of the loop variable, invariant in `region`."""
        if lp.end is None:
            return None
        b = self._bound(lp.end, region)
        if b is None:
            return None
        return p_add(b, ONE) if lp.inclusive else b

    def _bound(self, node: Node, region: Node, depth: int = 0) -> Poly | None:
        if depth > 6:
            return None
        if node.type == "parenthesized_expression" and len(node.named_children) == 1:
            return self._bound(node.named_children[0], region, depth + 1)
        if node.type == "identifier":
            d = lookup(node.text.decode(), node)
            if d is not None and d.init is not None and not d.param and not self.is_written(d) \
                    and self.loop_of_decl(d) is None:
                b = self._bound(d.init, region, depth + 1)
                if b is not None:
                    return b
        if node.type in ("conditional_expression", "call_expression"):
            arms = self._min_arms(node)
            for arm in arms or []:
                b = self.linear(arm, region)
                if b is not None and not any(VAR_MARK in s for m in b for s in m):
                    return b
            return None
        b = self.linear(node, region)
        if b is None or any(VAR_MARK in s for m in b for s in m):
            return None
        return b

    def _min_arms(self, node: Node) -> list[Node] | None:
        """Arms of `a < b ? a : b` / `min(a, b)`: the value is at most either arm."""
        if node.type == "call_expression":
            fn = self.src.text_of(node.child_by_field_name("function")).replace("std::", "")
            args = node.child_by_field_name("arguments").named_children
            return list(args) if fn in ("min", "fminf", "fmin") and len(args) == 2 else None
        cond = node.child_by_field_name("condition")
        a, b = node.child_by_field_name("consequence"), node.child_by_field_name("alternative")
        if cond is None or cond.type != "binary_expression" or a is None or b is None:
            return None
        op = cond.child_by_field_name("operator").type
        cl = self.src.text_of(cond.child_by_field_name("left")).replace(" ", "")
        cr = self.src.text_of(cond.child_by_field_name("right")).replace(" ", "")
        at, bt = self.src.text_of(a).replace(" ", ""), self.src.text_of(b).replace(" ", "")
        if op in ("<", "<=") and (cl, cr) == (at, bt):
            return [a, b]
        if op in (">", ">=") and (cl, cr) == (bt, at):
            return [a, b]
        return None

    def start_nonneg(self, lp: Loop, region: Node) -> bool:
        s = self.linear(lp.start, region) if lp.start is not None else None
        return s is not None and all(c >= 0 for c in s.values())

    def loop_by_key(self, key: str) -> Loop | None:
        for lp in self.loops:
            if lp.key == key:
                return lp
        return None


# ---------------------------------------------------------------- digits and independence

def split_terms(off: Poly) -> tuple[dict[str, Poly], Poly] | None:
    """{loop var: coefficient} and the invariant rest; None if a term is not linear in the
    loop variables (i*j, i*i)."""
    terms: dict[str, Poly] = {}
    rest: Poly = {}
    for m, c in off.items():
        vars_ = [s for s in m if VAR_MARK in s]
        if not vars_:
            rest[m] = c
            continue
        if len(vars_) > 1:
            return None
        v = vars_[0]
        coef_m = list(m)
        coef_m.remove(v)
        terms[v] = p_add(terms.get(v, {}), {tuple(coef_m): c})
    if any(not c or any(x < 0 for x in c.values()) for c in terms.values()):
        return None
    return terms, rest


def digits(model: FunctionModel, off: Poly, region: Node,
           assume: list[str] | None = None,
           spans_of: dict[str, Poly] | None = None) -> list[tuple[str, Poly]] | None:
    """The loop variables of an offset as mixed-radix digits, lowest first: each digit's
    weight is the product of the lower digits' bounds. None when the offset is not of that
    form, i.e. when the analysis cannot prove it one-to-one.

    With `assume` (a list), a digit whose weight is a single invariant name, a leading
    dimension (`C[i * ldc + j]`), is taken too, on the condition that the name is at least
    the lower digits' span: the condition (`ldc >= N`) is appended to `assume` for the
    caller to test at run time before the code that relies on it.

    `spans_of` adds bounds the language gives (`a[i][j]` of `T a[N][M]`: j < M) to the
    loop bounds of those counters."""
    # stays long: one algorithm (digits found lowest first, each weight matched against
    # the spans of the digits below); its two predicates are closures over those spans
    split = split_terms(off)
    if split is None:
        return None
    terms, _ = split
    # the weights a digit may have: a bound is read through a size's initializer
    # (`int T = (int)T_;` bounds t by T_) while a subscript keeps the name (`b * T + t`),
    # so both spellings of each bound are kept
    spans: list[Poly] = [dict(ONE)]
    order: list[tuple[str, Poly]] = []
    size_params = {p.name for p in params(model.fn) if p.pointer is None} \
        if assume is not None else set()
    remaining = dict(terms)
    def fits(c: Poly) -> bool:
        """The weight is one of the spans, or one plus a constant (`j < nx - 1` under a
        weight of nx: the lower digits still stay below the weight)."""
        for sp in spans:
            d = p_add(c, sp, -1)
            if not d or (set(d) == {()} and d[()] > 0):
                return True
        return False

    def leading(c: Poly) -> bool:
        """A stride the code does not fix: a single integer parameter of the function,
        coefficient 1, that is not itself a bound of the lower digits (`mean[b * T + t]`
        with `t <= T` overlaps whatever T is)."""
        if assume is None or len(c) != 1 or len(next(iter(c))) != 1 or \
                next(iter(c.values())) != 1:
            return False
        name = next(iter(c))[0]
        in_spans = {sym for sp in spans for mono in sp for sym in mono}
        return (name in size_params or _fixed_int_local(name)) and name not in in_spans and \
            all(VAR_MARK not in sym for sym in in_spans)

    def _fixed_int_local(name: str) -> bool:
        """A local that holds a size for the whole function (`int ldc = (int)ldc_;`,
        never assigned again): its value at the test is the one the loops see."""
        d = lookup(name, region)
        return d is not None and not d.param and not d.pointer and not d.array and \
            d.init is not None and not model.is_written(d) and \
            _base_type(model.src.text_of(d.node.child_by_field_name("type"))) in _INT_TYPES

    while remaining:
        match = [v for v, c in remaining.items() if fits(c)]
        if not match and len(order) > 0 and len(remaining) == 1:
            v, c = next(iter(remaining.items()))
            if leading(c):
                assert assume is not None
                assume.append(f"{p_str(c)} >= {p_str(spans[0])}")
                match = [v]
        if len(match) != 1:
            return None
        v = match[0]
        coef = remaining.pop(v)
        order.append((v, coef))
        if not remaining:
            break
        lp = model.loop_by_key(v)
        if lp is None or not model.start_nonneg(lp, region):
            return None
        bound = model.upper(lp, region)
        extra = spans_of.get(v) if spans_of else None
        if bound is None and extra is None:
            return None
        bounds = [bound] if bound is not None else []
        named = model.linear(lp.end, region) if lp.end is not None else None
        if named is not None and not any(VAR_MARK in s for mono in named for s in mono):
            named = p_add(named, ONE) if lp.inclusive else named
            if named != bound:
                bounds.append(named)
        if extra is not None and extra not in bounds:
            bounds.append(extra)
        spans = [p_mul(coef, b) for b in bounds]
    for v, _ in order:
        lp = model.loop_by_key(v)
        if lp is None or not model.start_nonneg(lp, region):
            return None
    return order
