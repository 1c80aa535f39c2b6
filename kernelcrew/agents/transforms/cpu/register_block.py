"""Register blocking of an interchanged (i-k-j) matmul-like nest: unroll-and-jam of the row
loop.

In the i-k-j order each element of a row of B feeds one FMA into one row of C, and the row
of C goes back to L1 after every k step. Blocked, RB rows of C (a knob) are computed
together in chunks of JB columns (a knob): a local `acc[RB][JB]` array that g++ keeps in
vector registers once the row loop is fully unrolled, so each loaded element of B feeds RB
FMAs and C is stored once. Column chunks that do not fill JB run the rows together with C
in memory; rows left over by the blocking (m % RB) run the original i-k-j code.

A scaling of the row before the products (`for (j ..) C[i][j] *= beta;`, the beta of `C =
alpha A B + beta C`) takes the zero loop's place: the block's accumulators start at `C *
beta`, the value the scaled element had.

Legal when the rows write distinct elements of C and so do the columns (the dependence
analysis of `check_loop`), the product reads nothing of C and B's element does not depend on
the row; every element still sums its k terms in the original order. The blocked code
defeats that analysis (C's row is `i + r`), so `omp_parallel` has to come first.

The recognized nest (what `interchange` produces, or the same code written by hand):

    for (T i = S; i < M; ++i) {
        [if (COND) {]                      // a row-invariant version test, kept (unswitched)
            for (j = J0; j < N; ++j) C[..i..j..] = ZERO;      // optional
            for (q = ..; q < K; ++q) {
                const F a = X(i, q);
                for (j = J0; j < N; ++j) C[..i..j..] += a * Y(q, j);
            }
        [} else { ... }]                   // the other version runs the original row loop
    }
"""

from __future__ import annotations

import re
from typing import Any

from kernelcrew.agents.transforms.analysis.common import (
    assignment,
    finish,
    fresh_name,
    guard_edit,
    in_as_was,
    in_small_path,
    invariant_text,
    loop_header,
    mentions_var,
    product,
    repeat,
    statements,
    versioned,
)
from kernelcrew.agents.transforms.analysis.dependence import check_loop
from kernelcrew.agents.transforms.analysis.types import resolve
from kernelcrew.agents.transforms.kernel_files import Outcome, each_entry
from kernelcrew.agents.transforms.views import through_views
from kernelcrew.csource.affine import FunctionModel
from kernelcrew.csource.syntax import (
    Edit,
    Loop,
    Node,
    Source,
    declarators,
    identifiers,
    lookup,
    pragma_text,
    pragmas_before,
    remove_lines,
    walk,
)
from kernelcrew.kernels.kernelfile import KernelFile

# first line of the loop over the rows left over by the blocking: never blocked again
REST_MARK = "// kernelcrew: rows left over by the register blocking"
_HINT = re.compile(r"omp\s+simd\b|GCC\s+unroll\b|unroll\b")
UNROLL_ALL = 64  # `#pragma GCC unroll` takes no macro: a bound above any sensible RB


def register_block(src: str, entry: str, *, rows: str = "RB", cols: str = "JB",
                   rows_default: int = 4, cols_default: int = 0) -> str | None:
    """Register-block every recognized i-k-j nest of `entry` (see the module doc); the
    block sizes are the macros `rows` and `cols`, defined with the defaults unless the
    source defines them (`cols_default` 0: four 32-byte vectors of C's element,
    `vector_columns`). None when no nest is recognized."""
    def once(s: Source, m: FunctionModel) -> str | None:
        for lp in m.loops:
            out = _block_one(s, m, lp, rows, cols, rows_default, cols_default)
            if out is not None:
                return out
        return None

    return repeat(src, entry, once)


def _plain(s: Source, node: Node) -> str:
    return re.sub(r"\s+", "", s.text_of(node))


def _is_zero_store(s: Source, m: FunctionModel, z: Loop, i: Loop
                   ) -> tuple[Node, Node, bool] | None:
    """`for (j ..) C[..] = LITERAL;` -> (C target, literal, False); `for (j ..) C[..] *=
    S;` with S a name fixed over the nest (the beta of `C = alpha A B + beta C`) -> (C
    target, S, True)."""
    if not z.canonical or z.children:
        return None
    st = statements(z.body)
    store = assignment(st[0], "=") if len(st) == 1 else None
    if store is None and len(st) == 1 and (scale := assignment(st[0], "*=")) is not None:
        target, value = scale
        if target.type == "subscript_expression" and value.type == "identifier" and \
                invariant_text(s, m, value, i.node) is not None:
            return target, value, True
        return None
    if store is None:
        return None
    target, value = store
    if target.type != "subscript_expression" or value.type != "number_literal":
        return None
    return target, value, False


def _row_loop(s: Source, m: FunctionModel, i: Loop
              ) -> tuple[list[Node], Node | None, Node | None, Node] | None:
    """The row loop: a unit-step `<` loop declaring its counter, under no pragma but a
    static `parallel for`, not blocked already; its body the nest or a row-invariant
    version test around it. (its pragmas, the test or None, the other version or None,
    the block that holds the nest)."""
    if in_small_path(i.node) or in_as_was(i.node) or not i.canonical or i.step is not None \
            or i.inclusive:
        return None
    if i.decl is None or i.decl.type != "declaration" or i.decl.parent is None or \
            i.decl.parent.type != "for_statement" or \
            i.body.type not in ("compound_statement", "if_statement"):
        return None
    if i.node.parent is None or i.node.parent.type != "compound_statement":
        return None
    i_prag = pragmas_before(i.node)
    if any(not re.fullmatch(r"omp\s+parallel\s+for(\s+schedule\s*\(\s*static\s*\))?",
                            pragma_text(s, p)) for p in i_prag):
        return None  # other worksharing forms or clauses: not sure the split keeps them right
    stmts = statements(i.body)
    if any(c.type == "comment" and s.text_of(c).strip() == REST_MARK
           for c in i.body.named_children):
        return None
    body = [st for st in stmts if st.type != "preproc_call"]
    cond = other = None
    core = i.body
    if len(body) == 1 and body[0].type == "if_statement":
        ifs = body[0]
        cond = ifs.child_by_field_name("condition")
        core = ifs.child_by_field_name("consequence")
        alt = ifs.child_by_field_name("alternative")
        if core is None or core.type != "compound_statement":
            return None
        if alt is not None:
            other = alt.named_children[0] if alt.type == "else_clause" else alt
            if other is None:
                return None
        if invariant_text(s, m, cond, i.node) is None or mentions_var(m, cond, i):
            return None
        if any(n.type in ("call_expression", "assignment_expression", "update_expression")
               for n in walk(cond)):
            return None
    elif any(st.type == "preproc_call" for st in stmts):
        return None
    return i_prag, cond, other, core


def _product_nest(s: Source, m: FunctionModel, i: Loop, core: Node
                  ) -> tuple[Loop | None, Loop, Loop, str, str, Node, Node, Node, Node] | None:
    """In the row's block, an optional zero loop and the k loop `const F a = X; for (j ..)
    C[..] += a * Y;`, with a free of j, Y depending on j but not on the row, and C's
    element on the row and the column but not on k: (zero loop or None, k loop, j loop,
    a's name and type, X, C's element, the product, Y)."""
    parts = [st for st in statements(core) if st.type != "comment"]
    if any(p.type == "preproc_call" and not _HINT.match(pragma_text(s, p)) for p in parts):
        return None
    parts = [p for p in parts if p.type != "preproc_call"]
    if not parts or any(p.type != "for_statement" for p in parts) or len(parts) > 2:
        return None
    loops = [lp for lp in i.children if any(lp.node == p for p in parts)]
    if len(loops) != len(parts):
        return None
    z = loops[0] if len(loops) == 2 else None
    q = loops[-1]
    # the k loop: `const F a = X; for (j ..) C[..] += a * Y;`
    if not q.canonical or len(q.children) != 1 or q.body.type != "compound_statement":
        return None
    if any(not _HINT.match(pragma_text(s, p)) for p in pragmas_before(q.node)):
        return None
    j = q.children[0]
    if not j.canonical or j.step is not None or j.inclusive or j.children:
        return None
    if j.decl is None or j.decl.type != "declaration" or j.decl.parent is None or \
            j.decl.parent.type != "for_statement":
        return None
    if any(not _HINT.match(pragma_text(s, p)) for p in pragmas_before(j.node)):
        return None
    qs = [st for st in statements(q.body) if st.type != "preproc_call"]
    if len(qs) != 2 or qs[0].type != "declaration" or qs[1] != j.node:
        return None
    ds = list(declarators(qs[0]))
    if len(ds) != 1 or ds[0][2] or ds[0][3] or ds[0][1] is None:
        return None
    a_name, x = ds[0][0], ds[0][1]
    a_type = s.text_of(qs[0].child_by_field_name("type")).strip()
    if mentions_var(m, x, j):
        return None
    js = statements(j.body)
    upd = assignment(js[0], "+=") if len(js) == 1 else None
    if upd is None:
        return None
    target, prod = upd
    if target.type != "subscript_expression" or (pq := product(prod)) is None:
        return None
    pl, pr = pq
    a_side = [n for n in (pl, pr) if n.type == "identifier" and n.text.decode() == a_name]
    if len(a_side) != 1:
        return None
    y = pr if a_side[0] == pl else pl
    if mentions_var(m, y, i) or not mentions_var(m, y, j) or \
            any(n.type == "identifier" and n.text.decode() == a_name for n in walk(y)):
        return None
    # C's element depends on the row and the column, not on k
    if not mentions_var(m, target, i) or not mentions_var(m, target, j) or \
            mentions_var(m, target, q):
        return None
    return z, q, j, a_name, a_type, x, target, prod, y


def _block_one(s: Source, m: FunctionModel, i: Loop, rows: str, cols: str, rows_default: int,
               cols_default: int) -> str | None:
    """The i-k-j nest under the row loop `i`, blocked (see the module docstring), or None
    where it is not one or the blocking is not legal."""
    row = _row_loop(s, m, i)
    if row is None:
        return None
    i_prag, cond, other, core = row
    nest = _product_nest(s, m, i, core)
    if nest is None:
        return None
    z, q, j, a_name, a_type, x, target, prod, y = nest
    c_root = m.subscript(target, i.node)
    if c_root is None:
        return None
    for side in (x, y):  # the product reads neither C nor anything through a call
        for n in walk(side):
            if n.type == "call_expression":
                return None
            if n.type == "subscript_expression":
                r = m.subscript(n, i.node)
                if r is None or r[0] == c_root[0]:
                    return None
    # the zero loop (or the scaling of C): the same columns of the same element
    zero, scaled = None, False
    if z is not None:
        got = _is_zero_store(s, m, z, i)
        if got is None or _plain(s, got[0]) != _plain(s, target) or \
                loop_header(s, z).replace(" ", "") != loop_header(s, j).replace(" ", ""):
            return None
        if any(not _HINT.match(pragma_text(s, p)) for p in pragmas_before(z.node)):
            return None
        zero = got[1].text.decode()
        scaled = got[2]
    # rectangular: k and j bounds fixed over the rows (and j's over k)
    for lp, region in ((q, i.node), (j, i.node)):
        for b in (lp.start, lp.end):
            if invariant_text(s, m, b, region) is None:
                return None
    if q.step is not None and invariant_text(s, m, q.step, i.node) is None:
        return None
    i_end = invariant_text(s, m, i.end, i.node)
    j_end = invariant_text(s, m, j.end, i.node)
    if i_end is None or j_end is None or invariant_text(s, m, i.start, i.node) is None or \
            any(n.type == "call_expression" for b in (i.start, i.end, j.start, j.end)
                for n in walk(b)):
        return None
    # the knob names must be free (or already the knobs' macros)
    for knob in (rows, cols):
        if not re.search(rf"#\s*define\s+{knob}\b", s.text) and \
                any(True for _ in identifiers(s.root, knob)):
            return None
    # legal: rows write distinct elements of C (so they can be interleaved), and so do
    # columns (so the column chunks can move outside the k loop); a k loop of its own
    # (where that rests on a leading dimension, `C[i * ldc + j]`, the blocked code runs
    # under a test of it, the code as it was otherwise)
    conds: list[str] = []
    for lp in (i, j) + ((z,) if z is not None else ()):
        v = check_loop(m, lp, allow_reductions=False, assume=True)
        if not v.ok:
            return None
        conds += [c for c in v.assume if c not in conds]
    return _emit(s, m, i, z, q, j, i_prag, cond, other, a_name, a_type, x, target, prod,
                 zero, rows, cols, rows_default, cols_default or vector_columns(s, a_type),
                 i_end, j_end, conds, scaled)


_BYTES = {"float": 4, "double": 8, "int": 4, "int32_t": 4, "long": 8, "long long": 8,
          "int64_t": 8, "short": 2, "int16_t": 2}


def vector_columns(s: Source, elem_type: str) -> int:
    """Columns of a block: four 32-byte vectors of the element (32 floats, 16 doubles),
    so RB=4 rows take 16 vector registers, all an AVX2 core has for them. With AVX-512's
    32 registers more would fit, but on a 2-core Zen 5 the float GEMM of 256^3 ran 0.18 ms
    at 4x32 beside 0.24 ms at 4x16, and 4x32 built without AVX-512 was no slower than 4x16
    (0.30 ms both); doubles were within 10% from 4x8 to 4x32."""
    size = _BYTES.get(resolve(s, elem_type) or "")
    return 4 * 32 // size if size else 16


def _subst(s: Source, m: FunctionModel, node: Node, lp: Loop, text: str) -> str:
    """The node's text with the loop variable of `lp` replaced by `text`."""
    base = node.start_byte
    out = s.data[node.start_byte:node.end_byte]
    for ident in reversed(list(identifiers(node, lp.var))):
        d = lookup(lp.var, ident)
        if d is None or lp.decl is None or d.node.start_byte != lp.decl.start_byte:
            continue
        out = out[:ident.start_byte - base] + text.encode() + out[ident.end_byte - base:]
    return out.decode()


def _emit(s: Source, m: FunctionModel, i: Loop, z: Loop | None, q: Loop, j: Loop,
          i_prag: list[Node], cond: Node | None, other: Node | None, a_name: str,
          a_type: str, x: Node, target: Node, prod: Node, zero: str | None, rows: str,
          cols: str, rows_default: int, cols_default: int, i_end: str, j_end: str,
          conds: list[str], scaled: bool = False) -> str | None:
    """The blocked nest's text in place of the row loop (the knobs' guards added)."""
    # stays long: it writes the blocked nest line by line, top to bottom; cut in pieces,
    # each would take a dozen of the names computed here
    i_type = s.text_of(i.decl.child_by_field_name("type")).strip()
    j_type = s.text_of(j.decl.child_by_field_name("type")).strip()
    elem = re.sub(r"\bconst\b", "", a_type).strip()
    if resolve(s, elem) not in ("float", "double"):
        return None  # the accumulator array's type: only plain floating point
    iv, jv = i.var, j.var
    i_start, j_start = s.text_of(i.start).strip(), s.text_of(j.start).strip()
    i_end, j_end = _paren(i_end), _paren(j_end)
    i_rb = fresh_name(m, f"{iv}_{rows.lower()}")
    j0 = fresh_name(m, f"{jv}0")
    r = fresh_name(m, "r")
    acc = fresh_name(m, "acc")
    c_row = _subst(s, m, target, i, f"({iv} + {r})")
    x_row = _subst(s, m, x, i, f"({iv} + {r})")
    y_prod = s.text_of(prod)
    slot = f"{acc}[{r}][{jv} - {j0}]"
    q_head = loop_header(s, q)
    jc = f"for ({j_type} {jv} = {j0}; {jv} < {j0} + {cols}; ++{jv}) {{"
    jr = f"for ({j_type} {jv} = {j0}; {jv} < {j_end}; ++{jv}) {{"
    rl = f"for (int {r} = 0; {r} < {rows}; ++{r}) {{"
    un = f"#pragma GCC unroll {UNROLL_ALL}"
    simd = "#pragma omp simd"

    def rows_then(line: str, j_loop: str, depth: int) -> list[tuple[int, str]]:
        """for r: for j (simd): line;"""
        return [(depth, un), (depth, rl), (depth + 1, simd), (depth + 1, j_loop),
                (depth + 2, line), (depth + 1, "}"), (depth, "}")]

    def k_rows(line: str, j_loop: str, depth: int) -> list[tuple[int, str]]:
        """for k: for r: a = X(i + r); for j (simd): line;"""
        return [(depth, f"{q_head} {{"), (depth + 1, un), (depth + 1, rl),
                (depth + 2, f"const {elem} {a_name} = {x_row};"), (depth + 2, simd),
                (depth + 2, j_loop), (depth + 3, line), (depth + 2, "}"), (depth + 1, "}"),
                (depth, "}")]

    limit = _block_end(i_start, i_end, rows)
    out: list[tuple[int, str]] = [(0, f"const {i_type} {i_rb} = {limit};")]
    out += [(0, f"#pragma {pragma_text(s, p)}") for p in i_prag]
    out += [(0, f"for ({i_type} {iv} = {i_start}; {iv} < {i_rb}; {iv} += {rows}) {{"),
            (1, f"{j_type} {j0} = {j_start};"),
            (1, f"for (; {j0} + {cols} <= {j_end}; {j0} += {cols}) {{"),
            (2, f"{elem} {acc}[{rows}][{cols}];")]
    init = f"{c_row} * {zero}" if scaled else zero if zero is not None else c_row
    out += rows_then(f"{slot} = {init};", jc, 2)
    out += k_rows(f"{slot} += {y_prod};", jc, 2)
    out += rows_then(f"{c_row} = {slot};", jc, 2)
    out += [(1, "}"), (1, f"if ({j0} < {j_end}) {{")]
    if zero is not None:
        out += rows_then(f"{c_row} {'*=' if scaled else '='} {zero};", jr, 2)
    out += k_rows(f"{c_row} += {y_prod};", jr, 2)
    out += [(1, "}"), (0, "}")]
    # the rows left over: the original i-k-j code on the rows past the last full block
    out += [(0, f"for ({i_type} {iv} = {i_rb}; {iv} < {i_end}; ++{iv}) {{"), (1, REST_MARK)]
    for lp in ([z] if z is not None else []) + [q]:
        out += [(1, ln) for ln in _orig(s, lp)]
    out += [(0, "}")]
    ind = s.indent_of(i.node)
    st = "    "
    base = ind if cond is None else ind + st

    def render(lines: list[tuple[int, str]], at: str) -> str:
        return "\n".join(t if t.startswith("#") or not t.strip() else at + st * d + t
                         for d, t in lines)

    new = render(out, base)
    if cond is not None:
        new = f"{ind}if {s.text_of(cond)} {{\n{new}\n{ind}}}"
        if other is not None:
            slow = [(0, f"#pragma {pragma_text(s, p)}") for p in i_prag]
            # the other version's block already sits one level deeper than the loop will
            slow.append((0, f"{loop_header(s, i)} {s.text_of(other)}"))
            new += " else {\n" + render(slow, ind + st) + f"\n{ind}}}"
    if conds:
        slow = "".join(f"#pragma {pragma_text(s, p)}\n" for p in i_prag) + \
            f"{ind}{s.text_of(i.node)}"
        new = versioned(ind, conds, new, slow)
    edits = remove_lines(s, i_prag)
    edits.append(Edit(s.line_start(i.node), i.node.end_byte, new))
    for knob, value in ((rows, rows_default), (cols, cols_default)):
        if not re.search(rf"#\s*define\s+{knob}\b", s.text):
            edits.append(guard_edit(s, m, knob, value))
    return finish(s, edits)


def _block_end(start: str, end: str, rows: str) -> str:
    """The first row past the last full block of `rows` rows."""
    if start == "0":
        return f"{end} / {rows} * {rows}"
    return f"{_paren(start)} + ({end} - {_paren(start)}) / {rows} * {rows}"


def _paren(text: str) -> str:
    return text if re.fullmatch(r"[\w.]+", text) else f"({text})"


def _orig(s: Source, lp: Loop) -> list[str]:
    """A loop's lines (its pragmas included) with the loop's own indentation removed."""
    prag = pragmas_before(lp.node)
    start = s.line_start(prag[0] if prag else lp.node)
    text = s.data[start:lp.node.end_byte].decode()
    ind = s.indent_of(lp.node)
    return [ln[len(ind):] if ln.startswith(ind) else ln.strip()
            for ln in text.split("\n")]


# ---------------------------------------------------------------- on a kernel file

def register_block_in_file(kf: KernelFile, p: dict[str, Any]) -> Outcome | None:
    """The register_block move on a kernel file: the block's knobs (rows, cols: their
    names) with their values from the front matter, else the defaults."""
    rows, cols = str(p["rows"]), str(p["cols"])
    rv = int(kf.meta.knobs.get(rows, p["rows_default"]))
    cv = int(kf.meta.knobs.get(cols, p.get("cols_default") or 0))
    out = each_entry(kf, lambda s, e: through_views(register_block)(
        s, e, rows=rows, cols=cols, rows_default=rv, cols_default=cv))
    if out is not None:
        if not cv:  # chosen by the element type: the value the code defines
            got = re.search(rf"#\s*define\s+{cols}\s+(\d+)", out.body or "")
            cv = int(got.group(1)) if got else 16
        out.knobs = {rows: rv, cols: cv}
    return out
