"""Unroll-and-jam of reduction nests: register tiling of dot-product loops.

A dot-product nest computes one output per iteration of an outer loop with an inner
reduction over a private accumulator:

    for (int o = 0; o < OC; o++) {
        float val = bias[o];                       // set-up: no loops, no calls with effects
        for (int i = 0; i < C; i++) {
            val += inp[bt * C + i] * weight[o * C + i];
        }
        out[bt * OC + o] = val;                    // wrap-up
    }

Jammed by U, U outputs are computed by one pass of the inner loop: U accumulators (one
vector register each under `omp simd reduction`), every element that does not depend on
`o` (here `inp[bt*C + i]`) is loaded once for U multiply-adds, and U independent chains hide
the FP-add latency. Leftover outer iterations (OC % U) run the original body.

The same jam takes a loop that adds rows into one vector (`for i { xi = x[i]; for j
y[j] += a[i * n + j] * xi; }`, a transposed mat-vec, the weighted values of attention):
the jammed inner loop adds U rows into each y[j] in their order, so y is loaded and stored
once per U rows.

Legal when the inner loop's bounds do not depend on the outer variable and the outer
iterations are independent (`check_loop` without reductions: each writes its own
elements, reads nothing another writes) but for what the jam keeps in order (`_carried`):
scalars that only the set-up, or only the wrap-up, mentions (a running maximum of the
scores, `denom += p`), whose copies run one after the other as the iterations did, and
arrays that only the inner loop touches, at one subscript that does not change with the
outer loop (y[j] above). Each accumulator still sums its terms in the original order
(the inner loop's `omp simd` reduction reassociates them, as `simd` would); each element
of an updated array receives its rows' terms in the original order. Offered only
where the inner loop's reads are unit-stride or invariant in its variable (otherwise the
vectorized inner loop would gather: interchange is the move there).

The jammed loop is written in OpenMP's canonical form (`for (i = a; i < i_jam; i += U)`,
the leftover iterations from `i_jam` on), so an `omp parallel for` the outer loop carried
stays on it: groups of U independent iterations are as independent as the iterations
were. Its clauses must mean the same on groups (schedule, num_threads, if, proc_bind,
default); any other OpenMP pragma on the loop (a reduction, private copies, a bare `omp
for` whose leftover iterations every thread of the team would run) refuses the jam.
"""

from __future__ import annotations

import re

from kernelcrew.agents.transforms.affine import FunctionModel, split_terms
from kernelcrew.agents.transforms.common import (
    collapsed,
    finish,
    in_small_path,
    invariant_text,
    mentions_var,
    model_of,
    repeat,
    statements,
)
from kernelcrew.agents.transforms.cst import (
    Edit,
    Loop,
    Node,
    Source,
    declarators,
    lookup,
    pragma_text,
    pragmas_before,
    walk,
)
from kernelcrew.agents.transforms.dependence import (
    PURE_CALLS,
    assign_target,
    check_loop,
    defined_functions,
)

JAM_MARK = "// kernelcrew: jammed by"


def unit_or_invariant(m: FunctionModel, lp: Loop) -> str | None:
    """None when every subscript in the loop is unit-stride or invariant in its variable,
    else the first offending access."""
    for n in walk(lp.body):
        if n.type != "subscript_expression":
            continue
        acc = m.subscript(n, lp.node)
        if acc is None or acc[1] is None:
            return m.src.text_of(n)
        sp = split_terms(acc[1])
        if sp is None:
            return m.src.text_of(n)
        coef = sp[0].get(lp.key)
        if coef is not None and coef != {(): 1}:
            return m.src.text_of(n)
    return None


def _plain(m: FunctionModel, stmt: Node) -> bool:
    """A set-up or wrap-up statement: no loop, no control flow, only pure calls."""
    defined = defined_functions(m.src)
    for n in walk(stmt):
        if n.type in ("for_statement", "while_statement", "do_statement", "return_statement",
                      "break_statement", "continue_statement", "goto_statement",
                      "preproc_call"):
            return False
        if n.type == "call_expression":
            name = m.src.text_of(n.child_by_field_name("function")).replace("std::", "").strip()
            if name not in PURE_CALLS or name in defined:
                return False
    return True


def jam_reason(m: FunctionModel, lp: Loop) -> str | None:
    """Why the loop `lp` cannot be jammed (None: it can)."""
    s = m.src
    line = s.line_of(lp.node)
    if not lp.canonical or lp.step is not None:
        return f"loop at line {line} is not a unit-step countable loop"
    if len(lp.children) != 1 or lp.children[0].children:
        return f"loop at line {line} does not hold exactly one innermost loop"
    inner = lp.children[0]
    stmts = statements(lp.body)
    if not any(st.start_byte == inner.node.start_byte for st in stmts):
        return f"the inner loop at line {s.line_of(inner.node)} is nested in a block"
    others = [st for st in stmts if st.start_byte != inner.node.start_byte
              and st.type != "preproc_call"]
    if not all(_plain(m, st) for st in others):
        return f"the body of the loop at line {line} has statements other than set-up and " \
               "wrap-up around the inner loop"
    if not inner.canonical:
        return f"inner loop at line {s.line_of(inner.node)} is not countable"
    for n in (inner.start, inner.end, inner.step):
        if n is not None and (mentions_var(m, n, lp) or
                              invariant_text(s, m, n, lp.node) is None):
            return f"the inner loop's bounds change with {lp.var}"
    v = check_loop(m, lp, allow_reductions=False)
    same: set[str] = set()
    carried: set[str] = set()
    if not v.ok:
        why, same = _carried(m, lp, inner)
        if why is not None:
            return f"iterations of {lp.var} are not independent: {v.reason}" + (
                f" ({why})" if why else "")
        carried = _carried_names(m, lp, inner, same)
    why = _pragma_reason(s, lp, carried)
    if why:
        return f"loop at line {line} {why}"
    vi = check_loop(m, inner, allow_reductions=True)
    if not vi.ok or not (vi.reductions or same):
        return f"the inner loop at line {s.line_of(inner.node)} is not a reduction" + (
            " and updates no array element-wise" if vi.ok and not same else "") + (
            f" ({vi.reason})" if vi.reason else "")
    if same and vi.reductions:
        return f"the inner loop at line {s.line_of(inner.node)} both reduces and updates " \
               "an array"
    if any(op != "+" for op in vi.reductions.values()):
        return "the inner reduction is not a sum"
    bad = unit_or_invariant(m, inner)
    if bad is not None:
        return f"{bad} is strided in {inner.var}: the jammed loop would gather (interchange " \
               "first)"
    if invariant_text(s, m, lp.end, lp.node) is None:
        return f"the bound of {lp.var} is not fixed before the loop"
    return None


def _carried(m: FunctionModel, lp: Loop, inner: Loop) -> tuple[str | None, set[str]]:
    """Whether the jam may reorder iterations of `lp` that are not independent: (None,
    the arrays updated element-wise) when what links them is only

    - scalars declared outside the loop that its set-up alone, or its wrap-up alone,
      mentions (a running maximum of the scores after each dot product, `denom += p`
      before each row is added): the jam runs the copies' set-ups one after the other
      in the original order, then their inner loops, then their wrap-ups, so each such
      scalar sees the same values in the same order;
    - arrays that only the inner loop touches, every access at one subscript that does
      not change with the outer loop (`y[j] += a[i * n + j] * x[i]`, the rows of a
      matrix added into one vector): iteration (i, j) meets only iterations (i', j) of
      the same j, and the jammed inner loop applies the copies' updates of y[j] in the
      original order of i.

    Else (why, set()): "" when neither explains it. A worksharing pragma on the loop with
    a carried scalar or array is left alone (the source would race)."""
    post_start, pre_end = inner.node.end_byte, inner.node.start_byte

    scalars = _outer_scalars(lp, inner)
    for name, key in scalars.items():
        where = set()
        for n in walk(lp.body):
            if n.type == "identifier" and n.text.decode() == name:
                d = lookup(name, n)
                if d is not None and d.key == key:
                    where.add("pre" if n.start_byte < pre_end else
                              "post" if n.start_byte >= post_start else "inner")
        if where != {"pre"} and where != {"post"}:
            return f"{name} is carried by more than the set-up or the wrap-up", set()
    arrays: dict[str, list] = {}
    for n in walk(lp.body):
        if n.type != "subscript_expression":
            continue
        acc = m.subscript(n, lp.node)
        if acc is None:
            continue
        arrays.setdefault(acc[0], []).append((n, acc[1]))
    same: set[str] = set()
    for root, uses in arrays.items():
        written = any((t := assign_target(u.parent)) is not None
                      and t.start_byte == u.start_byte and t.end_byte == u.end_byte
                      for u, _ in uses)
        if not written:
            continue
        offs = [off for _, off in uses]
        sp = split_terms(offs[0]) if offs[0] is not None else None
        if all(inner.node.start_byte <= u.start_byte < post_start for u, _ in uses) and \
                sp is not None and lp.key not in sp[0] and all(o == offs[0] for o in offs):
            same.add(root)
    if not scalars and not same:
        return "", set()
    names = _carried_names(m, lp, inner, same)
    if any(re.match(r"omp\b", pragma_text(m.src, p)) for p in pragmas_before(lp.node)) and \
            not names <= reduced_names(m.src, lp):
        return ("a value carried under a worksharing pragma without a reduction clause "
                "for it"), set()
    v = check_loop(m, lp, allow_reductions=False, exclude=frozenset(scalars.values()) | same)
    return (None, same) if v.ok else (v.reason, set())


# clauses of a `parallel for` on the jammed loop that mean the same on groups of its
# iterations (anything else, a reduction, private copies of other variables, collapse,
# ordered, refuses)
_KEPT_CLAUSES = re.compile(r"(schedule|num_threads|if|proc_bind|default)\s*\([^()]*\)")
_PRIVATE = re.compile(r"private\s*\(([^()]*)\)")
_REDUCTION = re.compile(r"reduction\s*\(\s*[^():]+:([^()]*)\)")


def reduced_names(s: Source, lp: Loop) -> set[str]:
    """The variables (arrays by their names) in the `reduction` clauses of the OpenMP
    pragmas on `lp`."""
    out: set[str] = set()
    for p in pragmas_before(lp.node):
        for r in _REDUCTION.finditer(pragma_text(s, p)):
            out |= {v.split("[")[0].strip() for v in r.group(1).split(",") if v.strip()}
    return out


def _carried_names(m: FunctionModel, lp: Loop, inner: Loop, same: set[str]) -> set[str]:
    """The names of what the iterations of `lp` carry past the jam: scalars declared
    outside it that its set-up or wrap-up assigns, and the arrays in `same` (Decl keys)."""
    return {r.split("@")[0] for r in same} | set(_outer_scalars(lp, inner))


def _outer_scalars(lp: Loop, inner: Loop) -> dict[str, str]:
    """Scalars declared outside `lp` that its set-up or wrap-up assigns: name -> Decl key."""
    out: dict[str, str] = {}
    for n in walk(lp.body):
        target = assign_target(n)
        if target is None or target.type != "identifier" or \
                inner.node.start_byte <= n.start_byte < inner.node.end_byte:
            continue
        d = lookup(target.text.decode(), target)
        if d is not None and not (d.node.start_byte >= lp.node.start_byte
                                  and d.node.end_byte <= lp.node.end_byte):
            out[target.text.decode()] = d.key
    return out


def worksharing(s: Source, lp: Loop, *, reductions: bool = False) -> str | None:
    """The loop's own `omp parallel for` pragma, when it is one the jam keeps (see
    `_pragma_reason`), else None. `private` naming only the loop's own counter (llama2.c's
    `#pragma omp parallel for private(i)`) says what OpenMP does anyway, on the jammed
    loop as on the original. With `reductions`, `reduction` clauses are kept too: a
    reduction over groups of iterations is the same reduction (the caller checks that
    the jam keeps what its variables carry in order, `_carried`)."""
    ps = [pragma_text(s, p) for p in pragmas_before(lp.node)]
    omp = [t for t in ps if re.match(r"omp\b", t)]
    if len(omp) != 1:
        return None
    m = re.fullmatch(r"omp\s+parallel\s+for\b(.*)", omp[0])
    if m is None:
        return None
    rest = _PRIVATE.sub(lambda p: "" if {v.strip() for v in p.group(1).split(",")} == {lp.var}
                        else p.group(0), m.group(1))
    if reductions:
        rest = _REDUCTION.sub("", rest)
    if _KEPT_CLAUSES.sub("", rest).replace(",", "").strip():
        return None
    return omp[0]


def _pragma_reason(s: Source, lp: Loop, carried: set[str] = frozenset()) -> str:
    """Why the OpenMP pragmas on `lp` stop the jam ("" when there are none, or only an
    `omp parallel for` whose clauses mean the same on groups of iterations: the jammed
    loop keeps it, its leftover iterations run on the calling thread). A reduction clause
    is kept when it names exactly the values the iterations carry (`carried`)."""
    omp = [pragma_text(s, p) for p in pragmas_before(lp.node)
           if re.match(r"omp\b", pragma_text(s, p))]
    keep = bool(carried) and reduced_names(s, lp) == carried
    if not omp or worksharing(s, lp, reductions=keep) is not None:
        return ""
    return f"carries an OpenMP pragma the jam cannot keep (`#pragma {omp[0]}`)"


def _declared_names(node: Node) -> dict[int, int]:
    """Start byte of each declared name's identifier -> start byte of its declaration."""
    out: dict[int, int] = {}
    for n in walk(node):
        if n.type != "declaration":
            continue
        for d in n.children_by_field_name("declarator"):
            while d is not None and d.type != "identifier":
                d = d.child_by_field_name("declarator") or (
                    d.named_children[0] if d.named_children else None)
            if d is not None:
                out[d.start_byte] = n.start_byte
    return out


def rename_copy(m: FunctionModel, node: Node, lp: Loop, k: int, var_text: str | None,
                renames: set[str], sep: str = "_") -> str:
    """The text of `node` for copy k of a loop body: the loop variable becomes `var_text`
    (unchanged when None), and in copies k > 0 the declarations named in `renames` (Decl
    keys) get a `{sep}k` suffix (`_k` by default), at their declaration and every use."""
    return copy_text(m, node, [(lp, var_text)],
                     {key: f"{key.split('@')[0]}{sep}{k}" for key in renames} if k else {})


def copy_suffix(names: list[str], copies: int, taken: set[str]) -> str | None:
    """The separator (`_`, `_j`, `_jj`, ...) whose suffixed copies `name{sep}k` of every
    name, k = 1 .. copies - 1, are all free (None after a few tries)."""
    for sep in ("_", "_j", "_jj", "_jjj"):
        if not any(f"{n}{sep}{k}" in taken for n in names for k in range(1, copies)):
            return sep
    return None


def copy_text(m: FunctionModel, node: Node, subs: list[tuple[Loop, str | None]],
               renames: dict[str, str]) -> str:
    """The text of `node` with each loop's counter replaced by its text (None: kept) and
    the declarations in `renames` (Decl key -> new name) renamed where declared and used."""
    s = m.src
    base = node.start_byte
    data = s.data[node.start_byte:node.end_byte]
    edits = []
    declared = _declared_names(node)
    for n in walk(node):
        if n.type != "identifier":
            continue
        name = n.text.decode()
        if n.start_byte in declared:
            new = renames.get(f"{name}@{declared[n.start_byte]}")
            if new is not None:
                edits.append((n.start_byte - base, n.end_byte - base, new))
            continue
        d = lookup(name, n)
        if d is None:
            continue
        hit = next((t for lp, t in subs if lp.decl is not None and name == lp.var
                    and d.node.start_byte == lp.decl.start_byte), False)
        if hit is not False:
            if hit is not None:
                edits.append((n.start_byte - base, n.end_byte - base, hit))
        elif d.key in renames:
            edits.append((n.start_byte - base, n.end_byte - base, renames[d.key]))
    for a, b, t in sorted(edits, reverse=True):
        data = data[:a] + t.encode() + data[b:]
    return data.decode()


def body_locals(body: Node, skip: Node | None = None) -> set[str]:
    """Decl keys of the declarations inside a loop body (`skip`: an inner loop's counter)."""
    out: set[str] = set()
    for n in walk(body):
        if n.type == "declaration" and (skip is None or n.start_byte != skip.start_byte):
            for name, _, _, _ in declarators(n):
                out.add(f"{name}@{n.start_byte}")  # Decl.key
    return out


def _jam_once(s: Source, m: FunctionModel, factor: int) -> str | None:
    for lp in m.loops:
        if in_small_path(lp.node) or collapsed(s, lp) or jam_reason(m, lp) is not None:
            continue
        if s.text_of(lp.node.parent).startswith("{  " + JAM_MARK):
            continue  # one of ours
        inner = lp.children[0]
        # locals declared in the outer body (set-up, the inner body; not the inner counter)
        locals_ = body_locals(lp.body, inner.decl)
        taken = {n.text.decode() for n in walk(m.fn) if n.type == "identifier"}
        sep = copy_suffix([key.split("@")[0] for key in locals_], factor, taken)
        if sep is None:
            continue  # the copies' names are taken
        red = check_loop(m, inner, allow_reductions=True).reductions
        stmts = statements(lp.body)
        pre = [st for st in stmts if st.end_byte <= inner.node.start_byte
               and st.type != "preproc_call"]
        post = [st for st in stmts if st.start_byte >= inner.node.end_byte]
        ind = s.indent_of(lp.node)
        st1 = ind + "    "
        st2 = st1 + "    "
        st3 = st2 + "    "
        copies = range(factor)

        def copy(st: Node, k: int, lp: Loop = lp, keys: set[str] = locals_,
                 sep: str = sep) -> str:
            return rename_copy(m, st, lp, k, f"({lp.var} + {k})" if k else None, keys, sep)

        pre_txt = "".join(f"{st2}{copy(st, k)}\n" for k in copies for st in pre)
        post_txt = "".join(f"{st2}{copy(st, k)}\n"
                           for k in copies for st in post)
        body_stmts = statements(inner.body)
        body_txt = _folded(body_stmts, copies, copy, st3) or "".join(
            f"{st3}{copy(st, k)}\n" for k in copies for st in body_stmts)
        names = [f"{r}{sep}{k}" if k else r for r in red for k in copies]
        ih = s.data[inner.node.start_byte:inner.body.start_byte].decode().rstrip()
        simd = f"#pragma omp simd reduction(+ : {', '.join(names)})\n" if names else \
            "#pragma omp simd\n"
        head = jam_header(s, m, lp, factor, taken)
        if head is None:
            continue
        var, init, start, end, lim, cmp, lim_text = head
        orig_body = s.text_of(lp.body).replace("\n", "\n    ")
        # the main loop in OpenMP's canonical form (`for (v = a; v < b; v += F)`), so a
        # `parallel for` it carried stays on it; the leftover iterations start at its end
        par = worksharing(s, lp, reductions=bool(reduced_names(s, lp)))
        text = (
            f"{{  {JAM_MARK} {factor}\n"
            f"{st1}{lim_text}\n"
            + (f"#pragma {par}\n" if par else "") +
            f"{st1}for ({init} = {start}; {var} < {lim}; {var} += {factor}) {{\n"
            f"{pre_txt}"
            f"{simd}"
            f"{st2}{ih} {{\n{body_txt}{st2}}}\n"
            f"{post_txt}"
            f"{st1}}}\n"
            f"{st1}for ({init} = {lim}; {var} {cmp} {end}; ++{var}) {orig_body}\n"
            f"{ind}}}"
        )
        # the jammed loop's own pragmas (unroll hints; a kept `parallel for` is put back
        # on the main loop above) do not apply to the new loops
        at = pragmas_before(lp.node)
        start_b = s.line_start(at[0]) if at else lp.node.start_byte
        return finish(s, [Edit(start_b, lp.node.end_byte, (ind if at else "") + text)])
    return None


def _folded(body: list[Node], copies: range, copy, indent: str) -> str | None:
    """The copies of a one-statement body `t[j] += e;` that every copy adds into the same
    element, as one statement, `t[j] = ((t[j] + (e0)) + (e1)) + ...;`: the same additions
    in the same order (the same result, bit for bit), with one load and one store of the
    element instead of one per copy. None when the body is anything else, the copies'
    targets differ (per-copy accumulators), or an added term reads the target's array."""
    if len(body) != 1 or body[0].type != "expression_statement" or \
            not body[0].named_children or body[0].named_children[0].type != "assignment_expression":
        return None
    asg = body[0].named_children[0]
    left, right = asg.child_by_field_name("left"), asg.child_by_field_name("right")
    op = asg.child_by_field_name("operator")
    if left is None or right is None or op is None or op.text not in (b"+=", b"-="):
        return None
    targets = {copy(left, k) for k in copies}
    if len(targets) != 1 or left.type not in ("subscript_expression", "identifier",
                                              "pointer_expression", "field_expression"):
        return None
    base = left
    while base.type != "identifier" and base.named_children:
        base = base.named_children[0]
    reads = {n.text for n in walk(right) if n.type == "identifier"}
    if base.type != "identifier" or base.text in reads:
        return None
    target = targets.pop()
    sign = op.text.decode()[0]
    text = target
    for k in copies:
        text = f"({text} {sign} {_paren(copy(right, k))})"
    return f"{indent}{target} = {text[1:-1]};\n"


def jam_header(s: Source, m: FunctionModel, lp: Loop, factor: int, taken: set[str]
               ) -> tuple[str, str, str, str, str, str, str] | None:
    """What a loop jammed by `factor` is written with: (var, init, start, end, lim, cmp,
    lim_text): `for (init = start; var < lim; var += factor)` runs the groups, `for (init
    = lim; var cmp end; ++var)` the leftover iterations, and `lim_text` declares `lim`, a
    fresh name. None when a bound is not fixed before the loop or the counter's type is
    unknown."""
    start = invariant_text(s, m, lp.start, lp.node)
    end = invariant_text(s, m, lp.end, lp.node)
    if start is None or end is None:
        return None
    var = lp.var
    own = lp.decl is not None and lp.decl.parent is not None and \
        lp.decl.parent.start_byte == lp.node.start_byte
    if own:
        ty = lp.decl.child_by_field_name("type")
    else:
        d = lookup(var, lp.node)
        ty = d.node.child_by_field_name("type") if d is not None else None
    if ty is None:
        return None
    decl_type = s.text_of(ty).replace("const ", "").strip()
    lim = next(f"{var}_jam{k or ''}" for k in range(len(taken) + 1)
               if f"{var}_jam{k or ''}" not in taken)
    cmp = "<=" if lp.inclusive else "<"
    e, b = _paren(end), _paren(start)
    span = e if b == "0" else f"{e} - {b}"
    count = f"({span} + 1)" if lp.inclusive else (span if span == e else f"({span})")
    init = f"{decl_type} {var}" if own else var
    lim_text = (f"const {decl_type} {lim} = {e} {'>=' if lp.inclusive else '>'} {b} ? "
                f"{'' if b == '0' else b + ' + '}{count} / {factor} * {factor} : {b};")
    return var, init, start, end, lim, cmp, lim_text


def _paren(text: str) -> str:
    return text if re.fullmatch(r"[\w.]+", text) else f"({text})"


def unroll_and_jam(src: str, entry: str, factor: int = 4) -> str | None:
    """Jam every dot-product nest of `entry` by `factor` (see the module docstring)."""
    if factor < 2:
        return None
    got = model_of(src, entry)
    if got is None:
        return None
    return repeat(src, entry, lambda s, m: _jam_once(s, m, factor))


def jam_reasons(src: str, entry: str) -> list[str]:
    """Why no loop of `entry` can be jammed, one reason per 2-deep nest."""
    got = model_of(src, entry)
    if got is None:
        return []
    _, m = got
    out = []
    for lp in m.loops:
        if lp.children and not any(c.children for c in lp.children):
            r = jam_reason(m, lp)
            if r is not None:
                out.append(r)
    return out
