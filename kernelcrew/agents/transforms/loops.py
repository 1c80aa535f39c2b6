"""Source transformations of C++/CUDA kernel bodies: `str -> str`, or None when the
transformation does not apply (nothing to do, or not provably legal).

Each function parses the body with tree-sitter, checks legality on the syntax tree
(see `analysis`), and rewrites byte ranges. Front matter (flags, knobs) is handled by the
kernel-level wrappers in `kernelcrew.agents.transforms`.
"""

from __future__ import annotations

import itertools
import re

from kernelcrew.agents.transforms.analysis import (
    PURE_CALLS,
    VAR_MARK,
    FunctionModel,
    Verdict,
    accesses,
    check_loop,
    defined_functions,
    digits,
    split_terms,
)
from kernelcrew.agents.transforms.cst import (
    Edit,
    Loop,
    Node,
    Source,
    apply_edits,
    declarators,
    find_function,
    functions,
    identifiers,
    insert_lines_before,
    lookup,
    params,
    pragma_text,
    pragmas_before,
    remove_lines,
    same,
    walk,
    within,
)

DEFAULT_MIN_WORK = 65536  # below this many inner iterations, threads cost more than they save
MIN_INNER = 8  # below this inner trip count an interchanged (vectorized) loop does not pay
# First line of the code kept for small sizes when a transformation versions a loop nest.
# Tiny cases run it; later transformations (simd, unroll, interchange, tiling) leave it
# alone, because their set-up costs more than such cases take.
SMALL_MARK = "// kernelcrew: small-size path, kept simple"
_HINTS = re.compile(r"^\s*#\s*pragma\s+(omp\s+simd\b|GCC\s+unroll\b|unroll\b)")


def in_small_path(node: Node) -> bool:
    """Inside a block that starts with SMALL_MARK."""
    p = node.parent
    while p is not None:
        if p.type == "compound_statement":
            first = p.named_children[0] if p.named_children else None
            if first is not None and first.type == "comment" and \
                    first.text.decode().strip() == SMALL_MARK:
                return True
        p = p.parent
    return False


def _strip_hints(text: str) -> str:
    """Drop simd/unroll pragma lines (hints only: the loops mean the same without them)."""
    return "\n".join(ln for ln in text.split("\n") if not _HINTS.match(ln))


def _model(src: str, entry: str) -> tuple[Source, FunctionModel] | None:
    s = Source(src)
    fn = find_function(s, entry)
    if fn is None or fn.child_by_field_name("body") is None:
        return None
    return s, FunctionModel(s, fn)


def _finish(s: Source, edits: list[Edit]) -> str | None:
    if not edits:
        return None
    out = apply_edits(s, edits)
    if out == s.text or Source(out).has_errors() and not s.has_errors():
        return None
    return out


def _has_pragma(s: Source, lp: Loop, word: str) -> bool:
    return any(re.search(word, pragma_text(s, p)) for p in pragmas_before(lp.node))


# ---------------------------------------------------------------- restrict

def add_restrict(src: str, entry: str) -> str | None:
    """Add `__restrict__` to every pointer parameter of `entry` (distinct buffers)."""
    s = Source(src)
    fn = find_function(s, entry)
    if fn is None:
        return None
    edits = []
    for p in params(fn):
        if p.pointer is None or p.restrict:
            continue
        star = next((c for c in p.pointer.children if c.type == "*"), None)
        if star is None:
            continue
        edits.append(Edit(star.end_byte, star.end_byte, " __restrict__"))
        # `float *x` style: keep one space between the qualifier and the name
        nxt = s.data[star.end_byte:star.end_byte + 1]
        if nxt not in (b" ", b"\t"):
            edits[-1] = Edit(star.end_byte, star.end_byte, " __restrict__ ")
    return _finish(s, edits)


# ---------------------------------------------------------------- OpenMP parallel for

def _invariant_text(s: Source, m: FunctionModel, node: Node | None, at: Node) -> str | None:
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


def _work_expr(s: Source, m: FunctionModel, lp: Loop) -> str | None:
    """A product of loop trip bounds for the nest under `lp`: the work an `if` clause
    compares against a threshold."""
    factors = []
    cur: Loop | None = lp
    while cur is not None:
        t = _invariant_text(s, m, cur.end, lp.node)
        if t is not None:
            factors.append(t if re.fullmatch(r"[\w.]+", t) else f"({t})")
        # follow the deepest child whose bound is known where the pragma goes
        kids = [c for c in cur.children if _invariant_text(s, m, c.end, lp.node) is not None]
        cur = max(kids or cur.children, key=lambda c: len(_descendants(c)), default=None)
    return " * ".join(factors) if factors else None


def owned_loops(m: FunctionModel, lp: Loop) -> set[str]:
    """Inner loops that walk one tile of a tiled loop: `for (i = i0; i < min(i0 + T, n); ..)`
    inside `for (i0 = 0; i0 < n; i0 += T)`. Distinct tiles own disjoint ranges of i."""
    if lp.step is None:
        return set()
    out = set()
    step_text = m.src.text_of(lp.step).replace(" ", "")
    for inner in _descendants(lp):
        if inner.start is None or inner.start.type != "identifier" or \
                inner.start.text.decode() != lp.var or inner.end is None:
            continue
        end = inner.end
        if end.type == "identifier":
            d = lookup(end.text.decode(), end)
            end = d.init if d is not None and d.init is not None else end
        arms = m._min_arms(end) if end.type in ("conditional_expression",
                                                "call_expression") else None
        for arm in arms or []:
            t = m.src.text_of(arm).replace(" ", "")
            if t in (f"{lp.var}+{step_text}", f"{step_text}+{lp.var}"):
                out.add(inner.key)
    return out


def _descendants(lp: Loop) -> list[Loop]:
    out = []
    for c in lp.children:
        out.append(c)
        out.extend(_descendants(c))
    return out


def parallel_verdict(m: FunctionModel, lp: Loop) -> Verdict:
    """Whether the iterations of `lp` may run on different threads (tiles count as the
    elements they own)."""
    return check_loop(m, lp, allow_reductions=False, owned=owned_loops(m, lp))


def omp_parallel_outer(src: str, entry: str, *, min_work: int = DEFAULT_MIN_WORK,
                       knob: str | None = None) -> str | None:
    """`#pragma omp parallel for schedule(static)` on each independent outermost loop of
    `entry`. Consecutive top-level loops that are all independent share one `omp parallel`
    region, each with `omp for` (its implicit barrier keeps the passes in order).

    The parallel code is versioned: `if (work >= min_work) { parallel } else { serial }`,
    because even an OpenMP `if(false)` clause costs ~0.4 us per call in libgomp, which is
    as much as a tiny case takes in all. With `knob`, the threshold is that macro (defined
    to `min_work` when the build does not set it), so it can be tuned like any knob."""
    got = _model(src, entry)
    if got is None:
        return None
    s, m = got
    if any(re.match(r"omp\s+(parallel|for)\b", pragma_text(s, n))
           for n in walk(m.body) if n.type == "preproc_call"):
        return None  # already threaded
    chosen: list[Loop] = []
    for top in m.forest:
        if top.canonical and parallel_verdict(m, top).ok:
            chosen.append(top)
            continue
        # a sequential outer loop: one level down
        for c in top.children:
            if c.canonical and parallel_verdict(m, c).ok:
                chosen.append(c)
    if not chosen:
        return None
    groups: list[list[Loop]] = []
    run = _region_run(s, m, chosen)
    if run is not None and len(run) > 1:
        groups.append(run)
    groups += [[lp] for lp in chosen if run is None or lp not in run or len(run) < 2]
    threshold = knob or str(min_work)
    edits: list[Edit] = [_parallel_version(s, m, g, threshold) for g in groups]
    if knob and f"#define {knob}" not in s.text and any(
            f">= {knob}" in e.text for e in edits):
        edits.append(_guard_edit(s, m, knob, min_work))
    return _finish(s, edits)


def _guard_edit(s: Source, m: FunctionModel, knob: str, value: int) -> Edit:
    """`#ifndef KNOB / #define KNOB value / #endif` before the function."""
    top = m.fn
    while top.parent is not None and top.parent.type != "translation_unit":
        top = top.parent
    at = s.line_start(top)
    return Edit(at, at, f"#ifndef {knob}\n#define {knob} {value}\n#endif\n\n")


def _parallel_version(s: Source, m: FunctionModel, group: list[Loop], min_work: str) -> Edit:
    """One edit that replaces the loops of `group` (consecutive statements) by a threaded
    copy for large work and the original code, without simd/unroll hints, for small work."""
    first, last = group[0].node, group[-1].node
    start, end = s.line_start(first), last.end_byte
    ind = s.indent_of(first)
    work = _work_expr(s, m, group[0])
    region = len(group) > 1
    pragma = "#pragma omp for" if region else "#pragma omp parallel for"

    def copy(with_pragmas: bool, extra: str) -> str:
        text = s.data[start:end]
        for lp in sorted(group, key=lambda x: x.node.start_byte, reverse=True):
            if with_pragmas:
                at = s.line_start(lp.node) - start
                clause = " collapse(2)" if _collapsible(m, lp) else ""
                line = f"{pragma}{clause} schedule(static)\n"
                text = text[:at] + line.encode() + text[at:]
        lines = text.decode().split("\n")
        return "\n".join(ln if not ln.strip() or ln.startswith("#") else extra + ln
                         for ln in lines)

    if work is None:  # no size known before the loop: thread it unconditionally
        if region:
            return Edit(start, end, f"#pragma omp parallel\n{ind}{{\n{copy(True, '    ')}\n"
                                    f"{ind}}}")
        return Edit(start, end, copy(True, ""))
    st = "    "
    par = copy(True, st + (st if region else ""))
    ser = f"{ind}{st}{SMALL_MARK}\n" + _strip_hints(copy(False, st))
    if region:
        par = f"#pragma omp parallel\n{ind}{st}{{\n{par}\n{ind}{st}}}"
    text = (f"{ind}if ({work} >= {min_work}) {{\n{par}\n{ind}}} else {{\n{ser}\n{ind}}}")
    return Edit(start, end, text)


def _collapsible(m: FunctionModel, lp: Loop) -> bool:
    """A tile loop whose body is just the next tile loop (rectangular, independent too):
    threads share out tiles of both, so a thin shape (3 rows: one row of tiles) still
    keeps every thread busy."""
    stmts = _stmts(lp.body)
    if lp.step is None or len(stmts) != 1 or len(lp.children) != 1:
        return False
    c = lp.children[0]
    if not same(stmts[0], c.node) or not c.canonical or c.step is None:
        return False
    if any(_mentions_var(m, n, lp) for n in (c.start, c.end, c.step)):
        return False
    return parallel_verdict(m, c).ok


def _region_run(s: Source, m: FunctionModel, chosen: list[Loop]) -> list[Loop] | None:
    """The chosen top-level loops when they are consecutive statements of the function body
    (only comments between): they can share one parallel region."""
    tops = [lp for lp in chosen if lp.parent is None]
    if len(tops) < 2:
        return None
    stmts = [c for c in m.body.named_children if c.type != "comment"]
    idx = [next((k for k, st in enumerate(stmts) if same(st, lp.node)), -1) for lp in tops]
    if -1 in idx or idx != list(range(idx[0], idx[0] + len(idx))):
        return None
    return tops


# ---------------------------------------------------------------- OpenMP simd

def omp_simd_inner(src: str, entry: str) -> str | None:
    """`#pragma omp simd` (with reduction clauses) on every innermost loop whose iterations
    are independent apart from recognized reductions. Loops that store with a non-unit
    stride are left alone (vector scatters cost more than scalar stores). An unroll pragma
    on a loop that gets simd is dropped (g++ refuses any pragma between the two)."""
    got = _model(src, entry)
    if got is None:
        return None
    s, m = got
    edits: list[Edit] = []
    for lp in m.loops:
        if lp.children or not lp.canonical or _has_pragma(s, lp, r"^omp\b.*\bsimd\b") or \
                in_small_path(lp.node):
            continue
        v = check_loop(m, lp, allow_reductions=True)
        if not v.ok or _scatters(m, lp):
            continue
        by_op: dict[str, list[str]] = {}
        for name, op in v.reductions.items():
            by_op.setdefault(op, []).append(name)
        clauses = "".join(f" reduction({op} : {', '.join(names)})"
                          for op, names in sorted(by_op.items()))
        # g++ accepts no other pragma between `omp simd` and its loop: an unroll pragma goes
        edits += remove_lines(s, [p for p in pragmas_before(lp.node)
                                  if re.match(r"(GCC\s+)?unroll\b", pragma_text(s, p))])
        edits += _insert_first(s, lp, f"#pragma omp simd{clauses}")
        for node, text in v.rewrites:
            edits.append(Edit(node.start_byte, node.end_byte, text))
    return _finish(s, edits)


def _scatters(m: FunctionModel, lp: Loop) -> bool:
    """Whether the loop stores to an array with a stride other than one element."""
    for n in walk(lp.body):
        p = n.parent
        if n.type != "subscript_expression" or p is None or \
                p.type != "assignment_expression" or p.child_by_field_name("left") != n:
            continue
        acc = m.subscript(n, lp.node)
        sp = split_terms(acc[1]) if acc is not None and acc[1] is not None else None
        coef = sp[0].get(lp.key) if sp is not None else None
        if coef is not None and coef != {(): 1}:
            return True
    return False


def _insert_first(s: Source, lp: Loop, line: str) -> list[Edit]:
    """Insert a pragma line before a loop, above any pragmas already attached to it."""
    prag = pragmas_before(lp.node)
    anchor = prag[0] if prag else lp.node
    if prag:
        start = s.line_start(anchor)
        return [Edit(start, start, line + "\n")]
    return insert_lines_before(s, lp.node, [line])


# ---------------------------------------------------------------- unroll

def unroll(src: str, factor: int, entry: str | None = None, *, style: str = "gcc"
           ) -> str | None:
    """`#pragma GCC unroll N` (CUDA: `#pragma unroll N`) on innermost loops of `entry`
    (every function when None); an existing unroll pragma gets the new factor. Loops under an
    OpenMP pragma are left alone (g++ allows no pragma between it and the loop)."""
    s = Source(src)
    if entry is None:

        fns = functions(s)
    else:
        fn = find_function(s, entry)
        fns = [fn] if fn is not None else []
    word = "GCC unroll" if style == "gcc" else "unroll"
    edits: list[Edit] = []
    for fn in fns:
        m = FunctionModel(s, fn)
        for lp in m.loops:
            if lp.children or _has_pragma(s, lp, r"^omp\b") or in_small_path(lp.node):
                continue  # g++ allows nothing between an OpenMP pragma and its loop
            existing = [p for p in pragmas_before(lp.node)
                        if re.match(r"(GCC\s+)?unroll\b", pragma_text(s, p))]
            if existing:
                if pragma_text(s, existing[0]) == f"{word} {factor}":
                    continue
                edits += remove_lines(s, existing)
                edits.append(Edit(s.line_start(lp.node), s.line_start(lp.node),
                                  f"#pragma {word} {factor}\n"))
                continue
            edits += insert_lines_before(s, lp.node, [f"#pragma {word} {factor}"])
    return _finish(s, edits)


# ---------------------------------------------------------------- interchange (matmul)

def _mentions_var(m: FunctionModel, node: Node, lp: Loop) -> bool:
    for ident in identifiers(node, lp.var):
        d = lookup(lp.var, ident)
        if d is not None and lp.decl is not None and d.node.start_byte == lp.decl.start_byte:
            return True
    return False


def _stmts(body: Node) -> list[Node]:
    if body.type == "compound_statement":
        return [c for c in body.named_children if c.type != "comment"]
    return [body]


def _header(s: Source, lp: Loop) -> str:
    return s.data[lp.node.start_byte:lp.body.start_byte].decode().rstrip()


def _fresh(m: FunctionModel, base: str) -> str:
    names = {n.text.decode() for n in walk(m.fn) if n.type == "identifier"}
    name, k = base, 2
    while name in names:
        name, k = f"{base}{k}", k + 1
    return name


def interchange(src: str, entry: str) -> str | None:
    """i-j-k matmul nests (`acc = 0; for k: acc += A[..k] * B[k*n + j]; C[..j] = acc`)
    become i-k-j: C's row is zeroed, A's element is hoisted into a scalar and the inner
    loop streams rows of B and C with unit stride. Only where B's inner access is strided
    and the rewrite is legal."""
    return _repeat(src, entry, lambda s, m: next(
        (out for j in m.loops if (out := _interchange_one(s, m, j)) is not None), None))


def _repeat(src: str, entry: str, once) -> str | None:
    """Apply a one-site rewrite until no site is left (versioned code has two copies)."""
    text, changed = src, False
    for _ in range(8):
        got = _model(text, entry)
        if got is None:
            return None
        out = once(*got)
        if out is None:
            break
        text, changed = out, True
    return text if changed else None


def _interchange_one(s: Source, m: FunctionModel, j: Loop) -> str | None:
    if in_small_path(j.node):
        return None
    if not j.canonical or len(j.children) != 1 or j.body.type != "compound_statement":
        return None
    if any(not re.match(r"omp\s+simd\b|GCC\s+unroll|unroll", pragma_text(s, p))
           for p in pragmas_before(j.node)):
        return None
    q = j.children[0]
    if not q.canonical or q.children:
        return None
    stmts = _stmts(j.body)
    pre = [st for st in stmts if st.start_byte < q.node.start_byte and st.type != "preproc_call"]
    post = [st for st in stmts if st.start_byte > q.node.end_byte]
    if len(pre) != 1 or len(post) != 1 or pre[0].type != "declaration":
        return None

    ds = list(declarators(pre[0]))
    if len(ds) != 1 or ds[0][2] or ds[0][1] is None:
        return None
    acc, zero = ds[0][0], ds[0][1]
    if zero.type != "number_literal" or float(zero.text.decode().rstrip("fFlL") or 1) != 0.0:
        return None
    acc_type = s.text_of(pre[0].child_by_field_name("type"))
    # the k loop: exactly `acc += X * Y;`
    qs = _stmts(q.body)
    if len(qs) != 1 or qs[0].type != "expression_statement":
        return None
    upd = qs[0].named_children[0]
    if upd.type != "assignment_expression" or upd.child_by_field_name("operator").type != "+=":
        return None
    if s.text_of(upd.child_by_field_name("left")).strip() != acc:
        return None
    prod = upd.child_by_field_name("right")
    if prod.type != "binary_expression" or prod.child_by_field_name("operator").type != "*":
        return None
    x, y = prod.child_by_field_name("left"), prod.child_by_field_name("right")
    if _mentions_var(m, x, j) and not _mentions_var(m, y, j):
        x, y, x_first = y, x, False
    else:
        x_first = True
    if _mentions_var(m, x, j) or not _mentions_var(m, y, j):
        return None
    if any(n.type == "identifier" and n.text.decode() == acc for n in walk(prod)):
        return None
    # the store: C[idx] = acc, idx free of the k variable
    st = post[0]
    if st.type != "expression_statement":
        return None
    store = st.named_children[0]
    if store.type != "assignment_expression" or \
            store.child_by_field_name("operator").type != "=" or \
            s.text_of(store.child_by_field_name("right")).strip() != acc:
        return None
    target = store.child_by_field_name("left")
    if target.type != "subscript_expression" or _mentions_var(m, target, q):
        return None
    # rectangular: the k loop's bounds do not depend on j
    if any(_mentions_var(m, n, j) for n in (q.start, q.end) if n is not None):
        return None
    # C is not read by the product, and each j writes its own element
    c_root = m.subscript(target, j.node)
    for n in walk(prod):
        if n.type == "subscript_expression":
            r = m.subscript(n, j.node)
            if r is None or c_root is None or r[0] == c_root[0]:
                return None
    if not check_loop(m, j, allow_reductions=False).ok:
        return None
    # profitable only when the innermost access of Y is strided in k and unit-stride in j
    y_acc = next((m.subscript(n, q.node) for n in walk(y) if n.type == "subscript_expression"),
                 None)
    if y_acc is None or y_acc[1] is None:
        return None
    split = split_terms(y_acc[1])
    if split is None:
        return None
    terms = split[0]
    kq = terms.get(q.key)
    if kq is None or kq == {(): 1}:
        return None
    y_j = m.subscript(next(n for n in walk(y) if n.type == "subscript_expression"), j.node)
    if y_j is None or y_j[1] is None or (split_j := split_terms(y_j[1])) is None or \
            split_j[0].get(j.key) != {(): 1}:
        return None
    simd = any(re.match(r"omp\s+simd", pragma_text(s, p)) for p in pragmas_before(q.node))
    ind = s.indent_of(j.node)
    step = "    "
    a = _fresh(m, "a_" + (q.var or "k"))
    c_text = s.text_of(target)
    y_text, x_text = s.text_of(y), s.text_of(x)
    prod_text = f"{a} * {y_text}" if x_first else f"{y_text} * {a}"
    n_text = _invariant_text(s, m, j.end, j.node)
    if n_text is None:
        return None
    simd_line = "#pragma omp simd\n" if simd else ""
    ii = ind + step  # the interchanged nest sits one level deeper, inside the version test
    fast = (
        f"{ii}{_header(s, j)} {{\n"
        f"{ii}{step}{c_text} = {zero.text.decode()};\n"
        f"{ii}}}\n"
        f"{ii}{_header(s, q)} {{\n"
        f"{ii}{step}const {acc_type} {a} = {x_text};\n"
        f"{simd_line}"
        f"{ii}{step}{_header(s, j)} {{\n"
        f"{ii}{step}{step}{c_text} += {prod_text};\n"
        f"{ii}{step}}}\n"
        f"{ii}}}"
    )
    # short rows: the original order (one dot product per element) is cheaper than
    # setting up a vector loop per (i, k) pair
    original = _strip_hints(s.data[s.line_start(j.node):j.node.end_byte].decode())
    original = "\n".join(step + ln if ln.strip() and not ln.startswith("#") else ln
                          for ln in original.split("\n"))
    n_cond = n_text if re.fullmatch(r"[\w.]+", n_text) else f"({n_text})"
    new = (f"{ind}if ({n_cond} >= {MIN_INNER}) {{\n{fast}\n{ind}}} else {{\n"
           f"{ii}{SMALL_MARK}\n{original}\n{ind}}}")
    edits = remove_lines(s, pragmas_before(j.node))
    edits.append(Edit(s.line_start(j.node), j.node.end_byte, new))
    return _finish(s, edits)


# ---------------------------------------------------------------- tiling (transpose)

def tile(src: str, entry: str, *, knob: str = "TILE", default: int = 32,
         inner: str = "write") -> str | None:
    """Cache-block a perfectly nested, fully independent 2-deep loop nest that accesses one
    array with a large stride in the inner loop (a transpose): TILE x TILE tiles keep the
    strided side's lines in L1. `inner="write"` (default) makes the loop over which the
    written array is contiguous the innermost one inside a tile (stores cost more than loads:
    a write-allocate per line); "keep" keeps the original order."""
    def once(s: Source, m: FunctionModel) -> str | None:
        for outer in m.loops:
            if len(outer.children) != 1 or in_small_path(outer.node):
                continue
            inner_lp = outer.children[0]
            if inner_lp.children or len(_stmts(outer.body)) != 1 or \
                    not same(_stmts(outer.body)[0], inner_lp.node):
                continue
            out = _tile_one(s, m, outer, inner_lp, knob, default, inner)
            if out is not None:
                return out
        return None

    return _repeat(src, entry, once)


def _strided(m: FunctionModel, lp_in: Loop, lp_out: Loop) -> tuple[bool, bool]:
    """(some access is strided along the inner loop, the written array is contiguous
    along the outer loop)."""
    strided = write_outer = False
    for n in walk(lp_in.body):
        if n.type != "subscript_expression":
            continue
        acc = m.subscript(n, lp_out.node)
        if acc is None or acc[1] is None or (sp := split_terms(acc[1])) is None:
            continue
        ci, co = sp[0].get(lp_in.key), sp[0].get(lp_out.key)
        if ci is not None and ci != {(): 1} and co == {(): 1}:
            strided = True
            p = n.parent
            if p.type == "assignment_expression" and p.child_by_field_name("left") == n:
                write_outer = True
    return strided, write_outer


def _tile_one(s: Source, m: FunctionModel, a: Loop, b: Loop, knob: str, default: int,
              inner: str) -> str | None:
    for lp in (a, b):
        if not lp.canonical or lp.step is not None or s.text_of(lp.start).strip() != "0" or \
                lp.inclusive:
            return None
    if _mentions_var(m, b.end, a) or any(not re.match(r"omp\s+(parallel\s+)?for\b|omp\s+simd",
                                                      pragma_text(s, p))
                                         for p in pragmas_before(a.node) +
                                         pragmas_before(b.node)):
        return None
    strided, write_outer = _strided(m, b, a)
    if not strided:
        return None
    # every (i, j) iteration independent of every other: reorder freely
    if not check_loop(m, a, allow_reductions=False).ok or \
            not check_loop(m, b, allow_reductions=False).ok:
        return None
    decl_type = s.text_of(a.decl.child_by_field_name("type")) if a.decl is not None and \
        a.decl.type == "declaration" else "long long"
    btype = s.text_of(b.decl.child_by_field_name("type")) if b.decl is not None and \
        b.decl.type == "declaration" else decl_type
    ia, ib = a.var, b.var
    a0, a1 = _fresh(m, f"{ia}0"), _fresh(m, f"{ia}1")
    b0, b1 = _fresh(m, f"{ib}0"), _fresh(m, f"{ib}1")
    ea, eb = s.text_of(a.end).strip(), s.text_of(b.end).strip()
    ind = s.indent_of(a.node)
    st = "    "
    body = s.text_of(b.body)
    body_lines = body.split("\n")
    body = "\n".join([body_lines[0]] + [f"{st}{st}{ln}" if ln.strip() else ln
                                        for ln in body_lines[1:]])
    a_prag = [pragma_text(s, p) for p in pragmas_before(a.node)]
    b_prag = [pragma_text(s, p) for p in pragmas_before(b.node)]
    loops_in = [(ia, decl_type, a0, a1, [p for p in a_prag if "simd" in p]),
                (ib, btype, b0, b1, b_prag)]
    if inner == "write" and write_outer:
        loops_in.reverse()
    outer_prag = [p for p in a_prag if "simd" not in p]
    lines = [f"#pragma {p}" for p in outer_prag]
    # the two tile loops are perfectly nested (tile ends computed inside), so a threaded
    # version can collapse them and balance thin shapes
    lines.append(f"{ind}for ({decl_type} {a0} = 0; {a0} < {ea}; {a0} += {knob}) {{")
    lines.append(f"{ind}{st}for ({btype} {b0} = 0; {b0} < {eb}; {b0} += {knob}) {{")
    lines.append(f"{ind}{st}{st}const {decl_type} {a1} = {a0} + {knob} < {ea} ? {a0} + {knob} "
                 f": {ea};")
    lines.append(f"{ind}{st}{st}const {btype} {b1} = {b0} + {knob} < {eb} ? {b0} + {knob} : "
                 f"{eb};")
    (v1, t1, s1, e1, p1), (v2, t2, s2, e2, p2) = loops_in
    lines += [f"#pragma {p}" for p in p1]
    lines.append(f"{ind}{st}{st}for ({t1} {v1} = {s1}; {v1} < {e1}; ++{v1}) {{")
    lines += [f"#pragma {p}" for p in p2]
    lines.append(f"{ind}{st}{st}{st}for ({t2} {v2} = {s2}; {v2} < {e2}; ++{v2}) {body}")
    lines.append(f"{ind}{st}{st}}}")
    lines.append(f"{ind}{st}}}")
    lines.append(f"{ind}}}")
    new = "\n".join(lines)
    edits = remove_lines(s, pragmas_before(a.node))
    start = s.line_start(a.node)
    edits.append(Edit(start, a.node.end_byte, new))
    if f"#define {knob}" not in s.text:
        edits.append(_guard_edit(s, m, knob, default))
    return _finish(s, edits)


# ---------------------------------------------------------------- fusion

def fuse_loops(src: str, entry: str) -> str | None:
    """Fuse consecutive loops with the same header whose bodies touch, for every array
    they share, the same element partition of the loop variable (y[i*cols + j] in both):
    e.g. three passes over a tensor become one. Repeats inward (fused outer loops bring
    their inner loops together). None when nothing can be fused legally."""
    text = src
    changed = False
    for _ in range(16):
        got = _model(text, entry)
        if got is None:
            return None
        s, m = got
        out = None
        for block in walk(m.body):
            if block.type != "compound_statement":
                continue
            stmts = [c for c in block.named_children if c.type not in ("comment", "preproc_call")]
            for a_node, b_node in itertools.pairwise(stmts):
                if a_node.type != "for_statement" or b_node.type != "for_statement":
                    continue
                a = next(x for x in m.loops if same(x.node, a_node))
                b = next(x for x in m.loops if same(x.node, b_node))
                out = _fuse_pair(s, m, a, b)
                if out is not None:
                    break
            if out is not None:
                break
        if out is None:
            break
        text, changed = out, True
    return text if changed else None


def fusion_blocker(s: Source, m: FunctionModel, a: Loop, b: Loop) -> str | None:
    """Why loops a and b cannot be fused (None: they can)."""
    if not a.canonical or not b.canonical:
        return "not countable loops"

    def norm(n: Node | None) -> str:
        return s.text_of(n).replace(" ", "") if n is not None else ""

    if (norm(a.start), norm(a.end), norm(a.step), a.inclusive) != \
            (norm(b.start), norm(b.end), norm(b.step), b.inclusive):
        return "different iteration ranges"
    pa = [pragma_text(s, p) for p in pragmas_before(a.node)]
    pb = [pragma_text(s, p) for p in pragmas_before(b.node)]
    if pa != pb:
        return "different pragmas"
    if b.var != a.var and any(True for _ in identifiers(b.body, a.var)):
        return f"{a.var} is used in the second loop"
    # bounds must not change in the first loop
    for n in (a.start, a.end):
        for ident in identifiers(n):
            d = lookup(ident.text.decode(), ident)
            if d is not None and any(_writes(m, x, d) for x in (a.body, b.body)):
                return f"bound {ident.text.decode()} changes in a loop"
    # scalars written in either loop and declared outside both
    for lp in (a, b):
        for n in walk(lp.body):
            t = n.child_by_field_name("left") if n.type == "assignment_expression" else \
                n.child_by_field_name("argument") if n.type == "update_expression" else None
            if t is None or t.type in ("subscript_expression",):
                continue
            if t.type != "identifier":
                return f"writes {s.text_of(t)!r}"
            d = lookup(t.text.decode(), t)
            if d is None or not within(d.node, lp.node):
                return f"updates {t.text.decode()}, declared outside the loops"
    for lp in (a, b):
        for n in walk(lp.body):
            if n.type == "call_expression":
                name = s.text_of(n.child_by_field_name("function")).replace("std::", "")
                if name not in PURE_CALLS and name not in defined_functions(s):
                    return f"calls {name}()"
    acc_a, acc_b = accesses(m, a.node), accesses(m, b.node)
    if isinstance(acc_a, str) or isinstance(acc_b, str):
        return acc_a if isinstance(acc_a, str) else acc_b
    written = {x.root for x in acc_a + acc_b if x.write}
    shared = written & ({x.root for x in acc_a} & {x.root for x in acc_b})
    for root in shared:
        sigs = set()
        for lp, accs in ((a, acc_a), (b, acc_b)):
            for x in accs:
                if x.root != root:
                    continue
                if x.offset is None:
                    return "an unresolved subscript"
                ds = digits(m, x.offset, lp.node)
                if ds is None:
                    return f"subscript {s.text_of(x.node)!r} is not a mixed-radix form"
                mine = [(v, c) for v, c in ds if v == lp.key]
                if len(mine) != 1:
                    return f"{s.text_of(x.node)!r} does not depend on {lp.var}"
                inv = split_terms(x.offset)[1]
                sigs.add((tuple(sorted(mine[0][1].items())), tuple(sorted(inv.items()))))
        if len(sigs) != 1:
            return f"the loops touch {root.split(VAR_MARK)[0]} at different positions"
    return None


def _writes(m: FunctionModel, node: Node, d) -> bool:
    for n in walk(node):
        t = n.child_by_field_name("left") if n.type == "assignment_expression" else \
            n.child_by_field_name("argument") if n.type == "update_expression" else None
        if t is not None and t.type == "identifier" and t.text.decode() == d.name:
            dd = lookup(d.name, t)
            if dd is not None and dd.key == d.key:
                return True
    return False


def _inner_text(s: Source, body: Node) -> str:
    if body.type == "compound_statement":
        return s.data[body.start_byte + 1:body.end_byte - 1].decode().strip("\n").rstrip()
    return s.indent_of(body) + s.text_of(body)


def _renamed(s: Source, lp: Loop, names: dict[str, str]) -> str:
    """The loop body's inner text with identifiers renamed."""
    body = lp.body
    base = body.start_byte + 1 if body.type == "compound_statement" else body.start_byte
    end = body.end_byte - 1 if body.type == "compound_statement" else body.end_byte
    edits = []
    for n in walk(body):
        if n.type == "identifier" and n.text.decode() in names:
            edits.append((n.start_byte - base, n.end_byte - base, names[n.text.decode()]))
    text = s.data[base:end]
    for a, b, t in sorted(edits, reverse=True):
        text = text[:a] + t.encode() + text[b:]
    out = text.decode()
    return out.strip("\n").rstrip() if body.type == "compound_statement" else \
        s.indent_of(body) + out


def _fuse_pair(s: Source, m: FunctionModel, a: Loop, b: Loop) -> str | None:
    if fusion_blocker(s, m, a, b) is not None:
        return None
    # locals declared at the top of b's body that a's body also declares get a new name
    def top_decls(lp: Loop) -> set[str]:

        out = set()
        for st in _stmts(lp.body):
            if st.type == "declaration":
                out |= {d[0] for d in declarators(st)}
        return out

    rename = {}
    if b.var != a.var:
        rename[b.var] = a.var
    for name in top_decls(b) & top_decls(a):
        rename[name] = _fresh(m, f"{name}_2")
    between = s.data[a.node.end_byte:b.node.start_byte].decode()
    comments = [ln.strip() for ln in between.split("\n")
                if ln.strip() and not ln.strip().startswith("#")]
    ind_body = s.indent_of(a.body.named_children[0]) if a.body.type == "compound_statement" \
        and a.body.named_children else s.indent_of(a.node) + "    "
    ind = s.indent_of(a.node)
    parts = [_inner_text(s, a.body)]
    parts += [f"{ind_body}{c}" for c in comments]
    parts.append(_renamed(s, b, rename) if rename else _inner_text(s, b.body))
    new = f"{_header(s, a)} {{\n" + "\n".join(parts) + f"\n{ind}}}"
    # b's pragmas (equal to a's) and the comments between the loops are inside this range
    return _finish(s, [Edit(a.node.start_byte, b.node.end_byte, new)])
