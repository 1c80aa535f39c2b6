"""Dependence analysis on the syntax tree: affine subscripts, loop-carried writes, reductions.

Subscripts are turned into polynomials over the loop variables and loop-invariant symbols
(`i*cols + j` -> {i: cols, j: 1}). An array write is independent across iterations of a
loop when its offset is a mixed-radix number whose digits are loop variables within their
bounds (j in [0, cols) with weight 1, i with weight cols, ...) and one digit is the loop's
own variable: then distinct iterations write distinct elements. Reads of an array that the
loop writes must sit at the same digit position (same element partition), and scalars
declared outside the loop may only be updated as recognized reductions.

Distinct pointer parameters are assumed not to overlap: the harness passes distinct
buffers for an operator's inputs and outputs.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kernelcrew.agents.transforms.cst import (
    Decl,
    Loop,
    Node,
    Source,
    all_loops,
    function_name,
    functions,
    lookup,
    loops_in,
    walk,
    within,
)

Mono = tuple[str, ...]
Poly = dict[Mono, int]

ONE: Poly = {(): 1}
VAR_MARK = "@"  # loop-variable symbols are "name@offset"; invariant symbols are plain names

# Calls that read their arguments and return a value, nothing else.
PURE_CALLS = frozenset(["exp", "expf", "exp2", "exp2f", "expm1", "expm1f", "log", "logf", "log2", "log2f", "log1p", "log1pf", "log10", "log10f", "sqrt", "sqrtf", "rsqrt", "rsqrtf", "cbrt", "cbrtf", "pow", "powf", "erf", "erff", "erfc", "erfcf", "tanh", "tanhf", "sinh", "cosh", "sin", "sinf", "cos", "cosf", "tan", "tanf", "atan", "atanf", "atan2", "atan2f", "fabs", "fabsf", "abs", "fmax", "fmaxf", "fmin", "fminf", "max", "min", "floor", "floorf", "ceil", "ceilf", "round", "roundf", "trunc", "truncf", "fma", "fmaf", "copysign", "copysignf", "__expf", "__logf", "__fdividef", "__frcp_rn", "__fsqrt_rn", "__ldg", "__saturatef", "isnan", "isinf", "isfinite"])


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


def _int_literal(text: str) -> int | None:
    t = text.rstrip("uUlL")
    try:
        return int(t, 0)
    except ValueError:
        return None


_INT_TYPES = ("int", "long", "int64_t", "int32_t", "size_t", "ptrdiff_t", "unsigned", "short",
              "long long", "uint64_t", "uint32_t", "long int")


class FunctionModel:
    """One function's loops and declarations, with the queries the transforms need."""

    def __init__(self, src: Source, fn: Node):
        self.src = src
        self.fn = fn
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
            v = _int_literal(node.text.decode())
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
            a = self.linear(node.child_by_field_name("left"), region, depth + 1)
            b = self.linear(node.child_by_field_name("right"), region, depth + 1)
            if a is None or b is None:
                return None
            if op == "+":
                return p_add(a, b)
            if op == "-":
                return p_add(a, b, -1)
            if op == "*":
                return p_mul(a, b)
            return None
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
        return p_sym(name)

    def pointer_root(self, node: Node, region: Node, depth: int = 0
                     ) -> tuple[str, Poly | None] | None:
        """(root, offset) of a pointer expression: a parameter or local array plus an offset."""
        if depth > 8:
            return None
        t = node.type
        if t == "parenthesized_expression" and len(node.named_children) == 1:
            return self.pointer_root(node.named_children[0], region, depth + 1)
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

    def subscript(self, node: Node, region: Node) -> tuple[str, Poly | None] | None:
        """(root, offset) of `base[index]`."""
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


def digits(model: FunctionModel, off: Poly, region: Node) -> list[tuple[str, Poly]] | None:
    """The loop variables of an offset as mixed-radix digits, lowest first: each digit's
    weight is the product of the lower digits' bounds. None when the offset is not of that
    form, i.e. when the analysis cannot prove it one-to-one."""
    split = split_terms(off)
    if split is None:
        return None
    terms, _ = split
    span: Poly = dict(ONE)
    order: list[tuple[str, Poly]] = []
    remaining = dict(terms)
    while remaining:
        match = [v for v, c in remaining.items() if c == span]
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
        if bound is None:
            return None
        span = p_mul(span, bound)
    for v, _ in order:
        lp = model.loop_by_key(v)
        if lp is None or not model.start_nonneg(lp, region):
            return None
    return order


@dataclass
class Access:
    root: str
    offset: Poly | None
    read: bool
    write: bool
    node: Node


@dataclass
class Verdict:
    ok: bool
    reason: str = ""
    reductions: dict[str, str] = field(default_factory=dict)  # var -> + | * | max | min
    rewrites: list[tuple[Node, str]] = field(default_factory=list)  # if-max -> ternary


def _assign_target(n: Node) -> Node | None:
    if n.type == "assignment_expression":
        return n.child_by_field_name("left")
    if n.type == "update_expression":
        return n.child_by_field_name("argument")
    return None


def accesses(model: FunctionModel, region: Node) -> list[Access] | str:
    """Every array access in a region, or a reason why the region cannot be analysed."""
    out: list[Access] = []
    for n in walk(region):
        if n.type == "subscript_expression":
            root = model.subscript(n, region)
            p = n.parent
            write = read = False
            if p.type == "assignment_expression" and p.child_by_field_name("left") == n:
                write = True
                read = p.child_by_field_name("operator").type != "="
            elif p.type == "update_expression":
                write = read = True
            else:
                read = True
            if root is None:
                if write:
                    return f"cannot resolve the array written at line {model.src.line_of(n)}"
                return f"cannot resolve the array read at line {model.src.line_of(n)}"
            out.append(Access(root[0], root[1], read, write, n))
        elif n.type == "pointer_expression" and n.child_by_field_name("operator").type == "*":
            p = n.parent
            if _assign_target(p) == n:
                return f"writes through a pointer at line {model.src.line_of(n)}"
            root = model.pointer_root(n.child_by_field_name("argument"), region)
            if root is None:
                return f"cannot resolve the pointer read at line {model.src.line_of(n)}"
            out.append(Access(root[0], root[1], True, False, n))
    return out


def _call_name(model: FunctionModel, call: Node) -> str:
    return model.src.text_of(call.child_by_field_name("function")).replace("std::", "").strip()


def defined_functions(src: Source) -> set[str]:
    """Names of the functions defined in the source (helpers a kernel calls)."""
    return {function_name(f) for f in functions(src)} - {None}


def check_loop(model: FunctionModel, lp: Loop, *, allow_reductions: bool,
               owned: set[str] | None = None) -> Verdict:
    """Can the iterations of `lp` run in any order (parallel for / simd)?"""
    if not lp.canonical:
        return Verdict(False, f"loop at line {model.src.line_of(lp.node)} is not in the "
                              "countable form `for (i = a; i < b; ++i)`")
    region = lp.node
    src = model.src
    own = {lp.key} | (owned or set())
    defined = defined_functions(model.src)
    verdict = Verdict(True)
    red_stmts: list[Node] = []
    # control flow that leaves the loop
    for n in walk(lp.body):
        if n.type in ("return_statement", "goto_statement", "throw_statement"):
            return Verdict(False, f"leaves the loop at line {src.line_of(n)}")
        if n.type == "break_statement" and _innermost_breakable(n) == lp.node:
            return Verdict(False, f"breaks out of the loop at line {src.line_of(n)}")
    # calls
    for n in walk(lp.body):
        if n.type != "call_expression":
            continue
        name = _call_name(model, n)
        if name not in PURE_CALLS and name not in defined:
            return Verdict(False, f"calls {name}() at line {src.line_of(n)}, which may have "
                                  "side effects")
        for a in n.child_by_field_name("arguments").named_children:
            if name == "__ldg":
                continue
            if a.type == "pointer_expression" or (
                    a.type == "identifier" and (d := lookup(a.text.decode(), a)) is not None
                    and (d.pointer or d.array)):
                return Verdict(False, f"passes a pointer to {name}() at line {src.line_of(n)}")
    # scalar writes
    for n in walk(lp.body):
        target = _assign_target(n)
        if target is None:
            continue
        if target.type in ("subscript_expression", "pointer_expression"):
            continue
        if target.type != "identifier":
            return Verdict(False, f"writes {src.text_of(target)!r} at line {src.line_of(n)}")
        name = target.text.decode()
        d = lookup(name, target)
        if d is None:
            return Verdict(False, f"writes {name}, declared outside the function")
        if within(d.node, region):
            continue  # private to an iteration (or an inner loop's variable)
        if not allow_reductions:
            return Verdict(False, f"updates {name} (declared outside the loop) at line "
                                  f"{src.line_of(n)}: a loop-carried dependence")
        kind = _reduction(model, n, d, lp)
        if kind is None:
            return Verdict(False, f"updates {name} at line {src.line_of(n)} in a way that is not "
                                  "a recognized reduction")
        prev = verdict.reductions.get(name)
        if prev is not None and prev != kind[0]:
            return Verdict(False, f"{name} is reduced two ways ({prev}, {kind[0]})")
        verdict.reductions[name] = kind[0]
        holder = n.parent.parent if kind[1] is not None else n.parent
        red_stmts.append(holder)
        if kind[1] is not None:
            verdict.rewrites.append(kind[1])
    # reduction variables: no other reads inside the loop
    for name in verdict.reductions:
        for ident in walk(lp.body):
            if ident.type != "identifier" or ident.text.decode() != name:
                continue
            if not any(within(ident, st) for st in red_stmts):
                return Verdict(False, f"{name} is read at line {src.line_of(ident)} while it is "
                                      "being reduced")
    # arrays
    accs = accesses(model, region)
    if isinstance(accs, str):
        return Verdict(False, accs)
    local_roots = set()
    for a in accs:
        d = lookup(a.root.split("@")[0], a.node)
        if d is not None and within(d.node, region):
            local_roots.add(a.root)
    written = {a.root for a in accs if a.write} - local_roots
    for root in written:
        ref = None
        for a in (x for x in accs if x.root == root):
            what = f"{'write' if a.write else 'read'} {src.text_of(a.node)!r} at line " \
                   f"{src.line_of(a.node)}"
            if a.offset is None:
                return Verdict(False, f"cannot tell which element the {what} touches")
            ds = digits(model, a.offset, region)
            if ds is None:
                return Verdict(False, f"cannot prove the {what} touches one element per "
                                      "iteration (subscript not a mixed-radix form)")
            mine = [(v, c) for v, c in ds if v in own]
            if len(mine) != 1:
                return Verdict(False, f"the {what} does not depend on {lp.var}: iterations "
                                      "would write the same element")
            split = split_terms(a.offset)
            sig = (mine[0][0], sorted(mine[0][1].items()), sorted(split[1].items()))
            if ref is None:
                ref = sig
            elif sig != ref:
                return Verdict(False, f"the {what} reaches an element another iteration of "
                                      f"{lp.var} writes")
    return verdict


def _innermost_breakable(n: Node) -> Node | None:
    p = n.parent
    while p is not None:
        if p.type in ("for_statement", "while_statement", "do_statement", "switch_statement",
                      "for_range_loop"):
            return p
        p = p.parent
    return None


def _same(model: FunctionModel, a: Node | None, b: Node | None) -> bool:
    return a is not None and b is not None and \
        model.src.text_of(a).replace(" ", "") == model.src.text_of(b).replace(" ", "")


def _mentions(node: Node | None, name: str) -> bool:
    return node is not None and any(
        n.type == "identifier" and n.text.decode() == name for n in walk(node))


def _reduction(model: FunctionModel, assign: Node, d: Decl, lp: Loop
               ) -> tuple[str, tuple[Node, str] | None] | None:
    """The reduction operator of `assign` on scalar `d`, and an optional rewrite of the
    statement into a form that vectorizes (if-max -> conditional expression)."""
    name = d.name
    if assign.type != "assignment_expression":
        return None
    op = assign.child_by_field_name("operator").type
    right = assign.child_by_field_name("right")
    stmt = assign.parent
    if stmt is None or stmt.type != "expression_statement":
        return None
    holder = stmt.parent
    if op in ("+=", "-=", "*="):
        if _mentions(right, name):
            return None
        if holder is not None and holder.type == "if_statement":
            return None
        return ("*" if op == "*=" else "+"), None
    if op != "=":
        return None
    if holder is not None and holder.type == "if_statement":
        return _if_minmax(model, holder, assign, name)
    if right.type == "binary_expression":
        bop = right.child_by_field_name("operator").type
        left_, right_ = right.child_by_field_name("left"), right.child_by_field_name("right")
        for mine, other in ((left_, right_), (right_, left_)):
            if mine.type == "identifier" and mine.text.decode() == name and \
                    not _mentions(other, name):
                if bop == "+" or (bop == "-" and mine is left_):
                    return "+", None
                if bop == "*":
                    return "*", None
        return None
    if right.type == "call_expression":
        fn = _call_name(model, right)
        args = right.child_by_field_name("arguments").named_children
        if fn in ("fmaxf", "fmax", "max", "fminf", "fmin", "min") and len(args) == 2:
            names = [a.type == "identifier" and a.text.decode() == name for a in args]
            if sum(names) == 1 and not any(_mentions(a, name) for a, m in zip(args, names,
                                                                             strict=True)
                                           if not m):
                return ("max" if "max" in fn else "min"), None
        return None
    if right.type == "conditional_expression":
        got = _cond_minmax(model, right, name)
        return (got, None) if got else None
    return None


def _cond_minmax(model: FunctionModel, node: Node, name: str) -> str | None:
    """`e > m ? e : m` (max) and its mirror images."""
    cond = node.child_by_field_name("condition")
    a, b = node.child_by_field_name("consequence"), node.child_by_field_name("alternative")
    while cond is not None and cond.type == "parenthesized_expression":
        cond = cond.named_children[0]
    if cond is None or cond.type != "binary_expression":
        return None
    op = cond.child_by_field_name("operator").type
    cl, cr = cond.child_by_field_name("left"), cond.child_by_field_name("right")

    def is_m(n: Node | None) -> bool:
        return n is not None and n.type == "identifier" and n.text.decode() == name

    # normalize to (e OP m)
    if is_m(cl) and not is_m(cr):
        cl, cr = cr, cl
        op = {">": "<", "<": ">", ">=": "<=", "<=": ">="}.get(op, op)
    if not is_m(cr) or _mentions(cl, name):
        return None
    if _same(model, a, cl) and is_m(b):
        return "max" if op in (">", ">=") else "min" if op in ("<", "<=") else None
    if is_m(a) and _same(model, b, cl):
        return "min" if op in (">", ">=") else "max" if op in ("<", "<=") else None
    return None


def _if_minmax(model: FunctionModel, ifs: Node, assign: Node, name: str
               ) -> tuple[str, tuple[Node, str]] | None:
    """`if (e > m) m = e;` -> max, rewritten as `m = e > m ? e : m;` so it vectorizes."""
    if ifs.child_by_field_name("alternative") is not None:
        return None
    cond = ifs.child_by_field_name("condition")
    inner = cond.named_children[0] if cond is not None and cond.named_children else None
    if inner is None or inner.type != "binary_expression":
        return None
    op = inner.child_by_field_name("operator").type
    cl, cr = inner.child_by_field_name("left"), inner.child_by_field_name("right")
    value = assign.child_by_field_name("right")
    src = model.src
    if cr.type == "identifier" and cr.text.decode() == name and _same(model, cl, value):
        kind = {">": "max", ">=": "max", "<": "min", "<=": "min"}.get(op)
    elif cl.type == "identifier" and cl.text.decode() == name and _same(model, cr, value):
        kind = {"<": "max", "<=": "max", ">": "min", ">=": "min"}.get(op)
    else:
        return None
    if kind is None or _mentions(value, name):
        return None
    e = src.text_of(value)
    text = f"{name} = ({src.text_of(inner)}) ? {e} : {name};"
    return kind, (ifs, text)
