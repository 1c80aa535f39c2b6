"""Keep a recomputed value: a pure call that a later pass over the same range makes again
is computed once, into a row buffer, and read back.

Code written without a scratch buffer often recomputes in a second pass what the first
pass already had: a softmax over scores finds the largest score in one loop, then
recomputes every score to exponentiate it.

    float mx = -INFINITY;
    for (int s = 0; s < T; s++) {
        float sc = dot(q, k + s * D, D) * scale;
        if (sc > mx) mx = sc;
    }
    for (int s = 0; s < T; s++) {
        float p = expf(dot(q, k + s * D, D) * scale - mx);
        sum += p;
        for (int d = 0; d < D; d++) o[d] += p * v[s * D + d];
    }

Here the first pass stores each call's value in a buffer and the second reads it; where the
second pass opens with a math function of the kept value (`float p = expf(...)`) whose
other operands the pass does not change, that function runs first as its own loop over the
buffer, which vectorizes (with the vector math move) where the pass around it cannot:

    if (T - 0 <= KEEP_MAX) {
        float kc_keep[KEEP_MAX];
        ... for (s...) { kc_keep[s - 0] = dot(q, k + s * D, D); float sc = kc_keep[s - 0] * scale; ... }
        #pragma omp simd
        for (s...) kc_keep[s - 0] = expf(kc_keep[s - 0] * scale - mx);
        for (s...) { float p = kc_keep[s - 0]; ... }
        ... (the rest of the block)
    } else {
        ... (the code as it was)
    }

The buffer is on the stack, 32 KB at most; a longer range runs the code as it was (the
rest of the block after the first pass goes into both versions, so declarations between the
passes stay in scope). Every value is the one the code computed before, in the same order.

Legal when: the two loops are siblings of one block with the same header (start, bound,
unit step; each declares its own counter, which the body does not assign; nothing named in
the bounds is assigned from the first loop to the end of the second); the call is a
pure function (a helper that writes nothing outside its locals, or a math function) whose
arguments name only the counter, variables declared before the first loop, and locals at
the top of each loop body initialized the same way, none of them assigned between the
first loop and the end of the second; the call runs on every iteration of the first loop
(not under a test, no `break`, `continue`, `return` or `goto` in that loop); no array that
the call reads (through its pointer arguments, or subscripts in them) is written from the
first loop to the end of the second, and every array written there is traceable to a
parameter or local array (the harness passes distinct buffers).
"""

from __future__ import annotations

import re

from kernelcrew.agents.transforms.analysis.common import fresh_name, model_of, statements
from kernelcrew.agents.transforms.analysis.dependence import (
    PURE_CALLS,
    defined_functions,
    impure_helpers,
)
from kernelcrew.agents.transforms.analysis.dependence import assign_target as _target
from kernelcrew.agents.transforms.reasons import per_entry
from kernelcrew.csource.syntax import (
    Edit,
    Loop,
    Node,
    Source,
    apply_edits,
    find_function,
    lead_start,
    lookup,
    params,
    within,
)
from kernelcrew.csource.syntax import walk as _walk
from kernelcrew.kernels.kernelfile import KernelFile

MARK = "// kernelcrew: values kept"
KEEP_BYTES = 32768  # the buffer's size on the stack
# math calls worth keeping (a few ns each, scalar); cheap ones (fabs, fmax) are not
COSTLY = frozenset(["exp", "expf", "exp2", "exp2f", "expm1", "expm1f", "log", "logf",
                    "log2", "log2f", "log1p", "log1pf", "log10", "log10f", "pow", "powf",
                    "erf", "erff", "erfc", "erfcf", "tanh", "tanhf", "sinh", "cosh", "sin",
                    "sinf", "cos", "cosf", "tan", "tanf", "atan", "atanf", "atan2", "atan2f",
                    "cbrt", "cbrtf"])
_FLOAT_MATH = re.compile(r"f$")
_JUMPS = ("return_statement", "goto_statement", "labeled_statement")
_SCALARS = {"float": 4, "double": 8}


def _unconditional(call: Node, body: Node) -> bool:
    """`call` runs whenever `body` does: no test, loop or short-circuit between them."""
    n = call.parent
    while n is not None and n.start_byte >= body.start_byte and not (
            n.start_byte == body.start_byte and n.end_byte == body.end_byte):
        if n.type in ("if_statement", "conditional_expression", "for_statement",
                      "while_statement", "do_statement", "switch_statement",
                      "compound_statement", "lambda_expression"):
            return False
        if n.type == "binary_expression" and \
                n.child_by_field_name("operator").type in ("&&", "||"):
            return False
        n = n.parent
    return True


def _jumps_out(body: Node) -> bool:
    """`break`/`continue` of this loop, or a `return`/`goto` anywhere in it."""
    def visit(n: Node, nested: bool) -> bool:
        if n.type in _JUMPS:
            return True
        if not nested and n.type in ("break_statement", "continue_statement"):
            return True
        inner = nested or n.type in ("for_statement", "while_statement", "do_statement",
                                     "switch_statement")
        return any(visit(c, inner) for c in n.children)
    return visit(body, False)


def _top_statement(n: Node, body: Node) -> Node | None:
    """The statement of `body` (a loop body) that holds `n`."""
    if body.type != "compound_statement":
        return body if within(n, body) else None
    while n is not None and n.parent is not None and not (
            n.parent.start_byte == body.start_byte and n.parent.end_byte == body.end_byte):
        n = n.parent
    return n


def _callee(s: Source, call: Node) -> str:
    return s.text_of(call.child_by_field_name("function")).replace("std::", "").strip()


def _return_type(s: Source, fn: Node) -> str | None:
    ty = s.text_of(fn.child_by_field_name("type")).strip()
    decl = fn.child_by_field_name("declarator")
    if decl is None or decl.type != "function_declarator":
        return None  # returns a pointer or a reference
    return ty if ty in _SCALARS else None


class _Pair:
    """Two sibling loops with the same header and what lies between them."""

    def __init__(self, s: Source, m, block: list[Node], i: int, j: int,
                 l1: Loop, l2: Loop):
        self.s, self.m, self.block, self.i, self.j = s, m, block, i, j
        self.l1, self.l2 = l1, l2

    # -- the value of an expression in one loop is the value of one in the other
    def same(self, a: Node, b: Node, depth: int = 0) -> bool:
        if depth > 4 or a.type != b.type or len(a.children) != len(b.children):
            return False
        if a.type == "identifier":
            return self._same_name(a, b, depth)
        if not a.children:
            return self.s.text_of(a) == self.s.text_of(b)
        if a.type == "field_expression":  # x.y: the field names are not variables
            return self.same(a.children[0], b.children[0], depth) and \
                self.s.text_of(a).split(".")[-1] == self.s.text_of(b).split(".")[-1]
        return all(self.same(x, y, depth) for x, y in zip(a.children, b.children, strict=True))

    def _same_name(self, a: Node, b: Node, depth: int) -> bool:
        na, nb = a.text.decode(), b.text.decode()
        if na == self.l1.var and nb == self.l2.var and \
                lookup(na, a) is not None and lookup(na, a).node.start_byte == \
                self.l1.decl.start_byte:
            return lookup(nb, b) is not None and \
                lookup(nb, b).node.start_byte == self.l2.decl.start_byte
        da, db = lookup(na, a), lookup(nb, b)
        if da is None or db is None:  # macros, enum constants, functions: by name
            return na == nb and da is None and db is None
        if da.key == db.key:  # one variable, declared before the first loop
            return not within(da.node, self.l1.node) and self._fixed(da)
        # a local of each loop's body, each set once to the same value
        if not (within(da.node, self.l1.body) and within(db.node, self.l2.body)):
            return False
        if da.init is None or db.init is None or self.m.is_written(da) or \
                self.m.is_written(db) or da.array or db.array:
            return False
        if da.node.parent is None or db.node.parent is None or \
                da.node.parent.start_byte != self.l1.body.start_byte or \
                db.node.parent.start_byte != self.l2.body.start_byte:
            return False
        ta = re.sub(r"\b" + re.escape(na) + r"\b", "", self.s.text_of(da.node))
        tb = re.sub(r"\b" + re.escape(nb) + r"\b", "", self.s.text_of(db.node))
        return ta.split("=")[0].split() == tb.split("=")[0].split() and \
            self.same(da.init, db.init, depth + 1)

    def _fixed(self, d) -> bool:
        """No assignment to `d` (nor its address taken) from the first loop to the end of
        the second."""
        for n in self.block[self.i:self.j + 1]:
            for x in _walk(n):
                t = _target(x)
                if t is not None and t.type == "identifier":
                    dx = lookup(t.text.decode(), t)
                    if dx is not None and dx.key == d.key:
                        return False
                if x.type == "pointer_expression" and x.children and \
                        x.children[0].type == "&":
                    arg = x.named_children[0] if x.named_children else None
                    if arg is not None and arg.type == "identifier" and \
                            lookup(arg.text.decode(), arg) is not None and \
                            lookup(arg.text.decode(), arg).key == d.key:
                        return False  # its address is taken
        return True


def _same_header(s: Source, a: Loop, b: Loop) -> bool:
    if not (a.canonical and b.canonical) or a.step is not None or b.step is not None:
        return False
    if a.inclusive != b.inclusive:
        return False
    for lp in (a, b):  # each declares its own counter
        if lp.decl is None or lp.decl.parent is None or \
                lp.decl.parent.start_byte != lp.node.start_byte:
            return False
    return s.text_of(a.start).strip() == s.text_of(b.start).strip() and \
        s.text_of(a.end).strip() == s.text_of(b.end).strip()


def _written_roots(pair: _Pair, nodes: list[Node], pure: set[str]) -> set[str] | str:
    """The buffers written by `nodes` (Decl keys), or why they cannot be told."""
    out: set[str] = set()
    m = pair.m
    for top in nodes:
        for n in _walk(top):
            if n.type == "call_expression":
                name = _callee(pair.s, n)
                if name not in pure and name not in PURE_CALLS:
                    return f"calls {name}(), which may write memory"
            t = _target(n)
            if t is None:
                continue
            while t.type == "parenthesized_expression" and t.named_children:
                t = t.named_children[0]
            if t.type == "identifier":
                d = lookup(t.text.decode(), t)
                if d is not None and d.array:
                    return f"assigns the array {t.text.decode()}"
                continue
            if t.type == "subscript_expression":
                base = t.child_by_field_name("argument")
            elif t.type == "pointer_expression":
                base = t.named_children[0] if t.named_children else None
            else:
                return f"writes {pair.s.text_of(t)}, which cannot be traced to a buffer"
            root = m.pointer_root(base, pair.l1.node) if base is not None else None
            if root is None:
                return f"writes through {pair.s.text_of(base)}, which cannot be traced " \
                       "to a parameter or local array"
            out.add(root[0])
    return out


def _read_roots(pair: _Pair, call: Node, helper: Node | None) -> set[str] | str:
    """The buffers a call reads: its pointer arguments (for a helper), the arrays
    subscripted or dereferenced in its arguments."""
    s, m = pair.s, pair.m
    out: set[str] = set()
    args = call.child_by_field_name("arguments").named_children
    ptr = [p.pointer is not None for p in params(helper)] if helper is not None else []
    for k, a in enumerate(args):
        if k < len(ptr) and ptr[k]:
            root = m.pointer_root(a, pair.l1.node)
            if root is None:
                return f"reads through {s.text_of(a)}, which cannot be traced to a buffer"
            out.add(root[0])
        for n in _walk(a):
            base = None
            if n.type == "subscript_expression":
                base = n.child_by_field_name("argument")
            elif n.type == "pointer_expression" and n.children and n.children[0].type == "*":
                base = n.named_children[0]
            if base is not None:
                root = m.pointer_root(base, pair.l1.node)
                if root is None:
                    return f"reads {s.text_of(n)}, which cannot be traced to a buffer"
                out.add(root[0])
    return out


def _globals_read(s: Source, helper: Node) -> str | None:
    for n in _walk(helper):
        if n.type != "identifier":
            continue
        d = lookup(n.text.decode(), n)
        if d is not None and d.node.parent is not None and \
                d.node.parent.type == "translation_unit" and not d.const:
            return n.text.decode()
    return None


def _sites(s: Source, m) -> list[_Pair]:
    out = []
    by_node = {lp.node.start_byte: lp for lp in m.loops}
    for blk in _walk(m.body):
        if blk.type != "compound_statement":
            continue
        stmts = [c for c in blk.named_children if c.type != "comment"]
        for i, a in enumerate(stmts):
            la = by_node.get(a.start_byte) if a.type == "for_statement" else None
            if la is None:
                continue
            for j in range(i + 1, len(stmts)):
                lb = by_node.get(stmts[j].start_byte) if stmts[j].type == "for_statement" \
                    else None
                if lb is not None and _same_header(s, la, lb):
                    out.append(_Pair(s, m, stmts, i, j, la, lb))
    return out


def _calls(s: Source, body: Node, pure_helpers: dict[str, Node]) -> list[Node]:
    """Calls worth keeping in a loop body: pure helpers returning float or double, and
    costly math functions; outer calls before the calls in their arguments."""
    out = []
    for n in _walk(body):
        if n.type != "call_expression":
            continue
        name = _callee(s, n)
        if name in pure_helpers or name in COSTLY:
            out.append(n)
    return out


def _value_type(s: Source, call: Node, helpers: dict[str, Node]) -> str | None:
    name = _callee(s, call)
    if name in helpers:
        return _return_type(s, helpers[name])
    return "float" if _FLOAT_MATH.search(name) else "double"


def _varies(n: Node, lp: Loop) -> bool:
    """`n` names the loop's counter or a local of its body (a row pointer set from it)."""
    for c in _walk(n):
        if c.type == "identifier":
            d = lookup(c.text.decode(), c)
            if c.text.decode() == lp.var or d is not None and within(d.node, lp.body):
                return True
    return False


def keep_reasons(src: str, entry: str) -> list[str]:
    """Why `keep_values` does not apply to `entry` (empty: it applies, or there is no
    pair of passes to speak of)."""
    return _keep(src, entry)[1]


def keep_values(src: str, entry: str) -> str | None:
    return _keep(src, entry)[0]


def _keep(src: str, entry: str) -> tuple[str | None, list[str]]:
    got = model_of(src, entry)
    if got is None:
        return None, []
    s, m = got
    if MARK in src:
        return None, []
    defined = defined_functions(s)
    impure = impure_helpers(s)
    helpers: dict[str, Node] = {}
    for name in defined - set(impure):
        fn = find_function(s, name)
        if fn is not None and name != entry and _return_type(s, fn) is not None and \
                _globals_read(s, fn) is None:
            helpers[name] = fn
    reasons: list[str] = []
    for pair in _sites(s, m):
        out, why = _try(pair, helpers)
        if out is not None:
            return out, []
        if why:
            reasons.append(f"loops at lines {s.line_of(pair.l1.node)} and "
                           f"{s.line_of(pair.l2.node)}: {why}")
    return None, reasons


def _try(pair: _Pair, helpers: dict[str, Node]) -> tuple[str | None, str | None]:
    s, l1, l2 = pair.s, pair.l1, pair.l2
    firsts = [c for c in _calls(s, l1.body, helpers) if _varies(c, l1)]
    if not firsts:
        return None, None
    seconds = _calls(s, l2.body, helpers)
    for c1 in firsts:
        again = [c2 for c2 in seconds if pair.same(c1, c2)]
        if not again:
            continue
        ty = _value_type(s, c1, helpers)
        if ty is None:
            return None, f"{_callee(s, c1)}() returns no float or double"
        if not _unconditional(c1, l1.body) or _jumps_out(l1.body):
            return None, (f"{_callee(s, c1)}() does not run on every iteration of the "
                          "first loop")
        for lp in (l1, l2):
            for n in _walk(lp.body):
                t = _target(n)
                if t is not None and t.type == "identifier" and t.text.decode() == lp.var:
                    return None, f"the loop at line {s.line_of(lp.node)} assigns its counter"
        for bound in (l1.start, l1.end):  # the same text must mean the same range
            for n in _walk(bound):
                d = lookup(n.text.decode(), n) if n.type == "identifier" else None
                if d is not None and not pair._fixed(d):
                    return None, f"{n.text.decode()}, in the loops' bounds, changes between them"
        written = _written_roots(pair, pair.block[pair.i:pair.j + 1], set(helpers))
        if isinstance(written, str):
            return None, written
        read = _read_roots(pair, c1, helpers.get(_callee(s, c1)))
        if isinstance(read, str):
            return None, read
        if read & written:
            return None, f"{_callee(s, c1)}() reads a buffer that the passes write"
        return _rewrite(pair, c1, again, ty), None
    return None, None


def _rewrite(pair: _Pair, c1: Node, again: list[Node], ty: str) -> str | None:
    s, m, l1, l2 = pair.s, pair.m, pair.l1, pair.l2
    buf = fresh_name(m, "kc_keep")
    cap = str(KEEP_BYTES // _SCALARS[ty])
    lo = s.text_of(l1.start).strip()
    hi = s.text_of(l1.end).strip()
    count = f"({hi}) - ({lo})" + (" + 1" if l1.inclusive else "")

    def at(var: str) -> str:
        return f"{buf}[{var}]" if lo == "0" else f"{buf}[{var} - ({lo})]"

    edits: list[Edit] = []
    stmt = _top_statement(c1, l1.body)
    ind = s.indent_of(stmt)
    store = f"{at(l1.var)} = {s.text_of(c1)};"
    if l1.body.type == "compound_statement":
        if s.data[s.line_start(stmt):stmt.start_byte].strip():  # `{ float x = f(s); ...`
            edits.append(Edit(stmt.start_byte, stmt.start_byte, store + " "))
        else:
            edits.append(Edit(s.line_start(stmt), s.line_start(stmt), f"{ind}{store}\n"))
        edits.append(Edit(c1.start_byte, c1.end_byte, at(l1.var)))
    else:
        edits.append(Edit(l1.body.start_byte, c1.start_byte,
                          "{\n" + ind + "    " + store + "\n" + ind + "    " +
                          s.data[l1.body.start_byte:c1.start_byte].decode()))
        edits.append(Edit(c1.start_byte, c1.end_byte, at(l1.var)))
        edits.append(Edit(l1.body.end_byte, l1.body.end_byte, "\n" + s.indent_of(l1.node) + "}"))
    split = _split_math(pair, again, buf, at(l2.var))
    for c2 in again:
        if split is not None and within(c2, split[0]):
            continue
        edits.append(Edit(c2.start_byte, c2.end_byte, at(l2.var)))
    if split is not None:
        init, text = split
        hdr = s.data[l2.node.start_byte:l2.body.start_byte].decode().rstrip()
        l2ind = s.indent_of(l2.node)
        start = lead_start(s, l2.node)
        if s.data[start:l2.node.start_byte].decode().strip() and not \
                s.data[start:l2.node.start_byte].decode().lstrip().startswith("#"):
            return None  # another statement shares the loop's line
        edits.append(Edit(start, start, f"{l2ind}#pragma omp simd\n{l2ind}{hdr}\n"
                                        f"{l2ind}    {at(l2.var)} = {text};\n"))
        edits.append(Edit(init.start_byte, init.end_byte, at(l2.var)))
    region_start = lead_start(s, pair.block[pair.i])
    region_end = pair.block[-1].end_byte
    original = s.data[region_start:region_end].decode()
    inner = [e for e in edits if region_start <= e.start and e.end <= region_end]
    if len(inner) != len(edits):
        return None
    shifted = Source(original)
    new = apply_edits(shifted, [Edit(e.start - region_start, e.end - region_start, e.text)
                                for e in inner])
    head = s.indent_of(pair.block[pair.i])
    guard = (f"{head}if ({count} <= {cap}) {{  {MARK}\n"
             f"{head}    {ty} {buf}[{cap}];\n"
             f"{_indent(new, '    ', head)}\n"
             f"{head}}} else {{\n"
             f"{_indent(original, '    ', head)}\n"
             f"{head}}}")
    out = s.data[:region_start].decode() + guard + s.data[region_end:].decode()
    if Source(out).has_errors() and not s.has_errors():
        return None
    return out


def _indent(text: str, more: str, head: str) -> str:
    """Every line of `text` (its first line starting after `head`) indented by `more`."""
    lines = text.split("\n")
    if lines and not lines[0].startswith(head):
        lines[0] = head + lines[0]
    return "\n".join((more + ln) if ln.strip() else ln for ln in lines)


def _split_math(pair: _Pair, again: list[Node], buf: str, slot: str
                ) -> tuple[Node, str] | None:
    """(the initializer to replace, the text its own loop computes) when the second loop
    opens with `T x = F(kept value)` (after other declarations only), F a costly math function of the kept value and of
    names the loop does not assign, and the kept value is used nowhere else in it."""
    s, l2 = pair.s, pair.l2
    if len(again) != 1 or l2.body.type != "compound_statement":
        return None
    # the declaration may follow others (a row pointer), never a statement that acts
    first = next((st for st in statements(l2.body) if st.type != "declaration"
                  or within(again[0], st)), None)
    if first is None or first.type != "declaration":
        return None
    decls = first.children_by_field_name("declarator")
    if len(decls) != 1 or decls[0].type != "init_declarator":
        return None
    init = decls[0].child_by_field_name("value")
    c2 = again[0]
    if init is None or not within(c2, init):
        return None
    if not any(n.type == "call_expression" and _callee(s, n) in COSTLY for n in _walk(init)):
        return None
    assigned = set()
    for n in _walk(l2.body):
        t = _target(n)
        if t is not None and t.type == "identifier":
            assigned.add(t.text.decode())
    for n in _walk(init):
        if within(n, c2):
            continue
        if n.type in ("subscript_expression", "field_expression", "pointer_expression",
                      "assignment_expression", "update_expression", "comma_expression"):
            return None
        if n.type == "call_expression" and _callee(s, n) not in PURE_CALLS:
            return None
        if n.type == "identifier" and n.parent is not None and \
                n.parent.type != "call_expression":
            name = n.text.decode()
            d = lookup(name, n)
            if name in assigned or d is not None and within(d.node, l2.node):
                return None
    text = s.data[init.start_byte:c2.start_byte].decode() + slot + \
        s.data[c2.end_byte:init.end_byte].decode()
    return init, text


def why_not(kf: KernelFile) -> str:
    return per_entry(kf, keep_reasons, "no pure call (a helper, exp/log/tanh...) that a "
                     "later loop over the same range computes again")
