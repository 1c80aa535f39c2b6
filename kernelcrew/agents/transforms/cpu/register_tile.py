"""Register tiles of dot-product nests: the row loop around one jammed too.

`unroll_and_jam` takes a dot-product nest, one output per iteration of its outer loop:

    for (int t = 0; t < T; t++) {                 // the rows of the first operand
        int bt = b * T + t;                       // set-up: plain statements
        for (int o = 0; o < OC; o++) {            // the dot-product nest
            float val = bias[o];
            for (int i = 0; i < C; i++) val += inp[bt * C + i] * weight[o * C + i];
            out[bt * OC + o] = val;
        }
    }

and shares each element that does not depend on `o` (a row of `inp`) among the outputs it
jams. Every row `t` still streams the whole of the other operand (`weight`): in a matrix
product that is the traffic that counts. Jamming the row loop by R as well makes R x S
tiles of outputs: R x S accumulators (one vector register each under `omp simd
reduction`), R + S loads for R x S multiply-adds, and each element of either operand
loaded once for the whole tile. R rows are jammed here; the output loop inside is then
jammed by S as `unroll_and_jam` does.

Legal when the rows are independent (`check_loop` without reductions: each row writes
its own elements and reads nothing another row writes), the nest inside is one
`unroll_and_jam` takes, and its bounds do not depend on the row; each accumulator still
sums its terms in the original order (the inner `omp simd` reduction reassociates them,
as `simd` would). Offered only where some operand of the inner loop does not depend on
the row: otherwise the rows share nothing and there is nothing to gain. Leftover rows
(a count that R does not divide) run the original code.

Pragmas: an `omp parallel for` on the row loop stays on the jammed loop (its clauses must
mean the same on groups of rows, as for `unroll_and_jam`); a row loop that is the second
level of a `collapse(2)` nest keeps the collapse: the whole nest is written twice, once
over the groups of rows and once over the leftover rows, each under the source's pragma.
"""

from __future__ import annotations

import re

from kernelcrew.agents.transforms.analysis.body_copies import (
    JAM_MARK,
    body_locals,
    copy_text,
    jam_header,
)
from kernelcrew.agents.transforms.analysis.common import (
    finish,
    in_as_was,
    in_small_path,
    indented,
    invariant_text,
    mentions_var,
    model_of,
    repeat,
    statements,
    versioned,
)
from kernelcrew.agents.transforms.analysis.dependence import check_loop
from kernelcrew.agents.transforms.analysis.dot_nests import jam_reason, plain_statement
from kernelcrew.agents.transforms.analysis.openmp import collapsed_worksharing, worksharing
from kernelcrew.agents.transforms.reasons import per_entry
from kernelcrew.csource.affine import FunctionModel, split_terms
from kernelcrew.csource.syntax import (
    Edit,
    Loop,
    Node,
    Source,
    declarators,
    pragma_text,
    pragmas_before,
    walk,
)
from kernelcrew.kernels.kernelfile import KernelFile

ROW_MARK = "// kernelcrew: rows jammed by"


def _under_mark(node: Node) -> bool:
    p = node.parent
    while p is not None:
        if p.type == "compound_statement" and p.text.decode().startswith("{  " + ROW_MARK):
            return True
        p = p.parent
    return False


def _collapse_parent(s: Source, x: Loop) -> tuple[Loop, str] | None:
    """(the loop, its pragma) when `x` is the second level of an `omp parallel for
    collapse(2)` nest."""
    p = x.parent
    if p is None:
        return None
    for pr in pragmas_before(p.node):
        t = pragma_text(s, pr)
        if re.search(r"\bcollapse\s*\(\s*2\s*\)", t) and re.match(r"omp\s+parallel\s+for\b", t):
            return p, t
    return None


def _collapsed_deeper(s: Source, x: Loop) -> bool:
    """`x` is inside a collapse(N) nest other than as the second level of collapse(2)."""
    depth, cur = 1, x.parent
    while cur is not None:
        for p in pragmas_before(cur.node):
            mt = re.search(r"\bcollapse\s*\(\s*(\d+)\s*\)", pragma_text(s, p))
            if mt and int(mt.group(1)) > depth and not (depth == 1 and int(mt.group(1)) == 2):
                return True
        depth, cur = depth + 1, cur.parent
    return False


def shared_reads(m: FunctionModel, x: Loop, k: Loop) -> list[str]:
    """The reads in the inner loop `k` whose element does not depend on the row `x`: what R
    jammed rows would share."""
    out = []
    for n in walk(k.body):
        if n.type != "subscript_expression":
            continue
        acc = m.subscript(n, x.node)
        if acc is None or acc[1] is None:
            continue
        sp = split_terms(acc[1])
        if sp is not None and x.key not in sp[0]:
            out.append(m.src.text_of(n))
    return out


def tile_reason(m: FunctionModel, x: Loop) -> str | None:
    """Why the row loop `x` cannot be jammed around the dot-product nest inside it (None:
    it can)."""
    s = m.src
    line = s.line_of(x.node)
    if len(x.children) != 1 or len(x.children[0].children) != 1 or \
            x.children[0].children[0].children:
        return f"loop at line {line} does not hold exactly one dot-product nest"
    y = x.children[0]
    k = y.children[0]
    if not x.canonical or x.step is not None:
        return f"loop at line {line} is not a unit-step countable loop"
    stmts = statements(x.body)
    if not any(st.start_byte == y.node.start_byte for st in stmts):
        return f"the loop at line {s.line_of(y.node)} is nested in a block"
    others = [st for st in stmts if st.start_byte != y.node.start_byte
              and st.type != "preproc_call"]
    if not all(plain_statement(m, st) for st in others):
        return f"the body of the loop at line {line} has statements other than set-up and " \
               "wrap-up around the nest"
    for lp in (y, k):
        if lp.decl is not None and lp.decl.parent is not None and \
                lp.decl.parent.start_byte != lp.node.start_byte and \
                x.body.start_byte <= lp.decl.start_byte < x.body.end_byte:
            return f"the counter {lp.var} is declared in the row loop's body"
        for n in (lp.start, lp.end, lp.step):
            if n is not None and (mentions_var(m, n, x) or
                                  invariant_text(s, m, n, x.node) is None):
                return f"the bounds of the loop at line {s.line_of(lp.node)} change with " \
                       f"{x.var}"
    why = jam_reason(m, y)
    if why is not None:
        return f"the nest inside is not one unroll_and_jam takes: {why}"
    if any(re.match(r"omp\b", pragma_text(s, p)) for p in pragmas_before(y.node)):
        return f"the output loop at line {s.line_of(y.node)} carries an OpenMP pragma"
    omp = [pragma_text(s, p) for p in pragmas_before(x.node)
           if re.match(r"omp\b", pragma_text(s, p))]
    first = collapsed_worksharing(s, x)
    if first is not None and [st.start_byte for st in stmts if st.type != "preproc_call"] \
            != [y.node.start_byte]:
        return f"the collapse(2) nest at line {line} is not perfect"
    if omp and worksharing(s, x) is None and first is None:
        return f"loop at line {line} carries an OpenMP pragma the jam cannot keep " \
               f"(`#pragma {omp[0]}`)"
    if _collapsed_deeper(s, x):
        return f"loop at line {line} is inside a collapse(N) nest the jam cannot keep"
    coll = _collapse_parent(s, x)
    if coll is not None:
        p = coll[0]
        if [st.start_byte for st in statements(p.body) if st.type != "preproc_call"] != \
                [x.node.start_byte]:
            return f"the collapse(2) nest at line {s.line_of(p.node)} is not perfect"
        if any(invariant_text(s, m, n, p.node) is None for n in (x.start, x.end)):
            return f"the bounds of {x.var} are not fixed before the collapse(2) nest"
    v = check_loop(m, x, allow_reductions=False, assume=True)
    if not v.ok:
        return f"rows of {x.var} are not independent: {v.reason}"
    if not shared_reads(m, x, k):
        return f"every read of the inner loop at line {s.line_of(k.node)} depends on " \
               f"{x.var}: the rows share nothing"
    return None


def _tag(r: int, c: int) -> str:
    return "" if not r and not c else f"_r{r}" if not c else f"_c{c}" if not r else f"_r{r}c{c}"


def _row_jam_once(s: Source, m: FunctionModel, rows: int, cols: int) -> str | None:
    for x in m.loops:
        if in_small_path(x.node) or in_as_was(x.node) or _under_mark(x.node) or \
                tile_reason(m, x) is not None:
            continue
        out = _tile(s, m, x, rows, cols)
        if out is not None:
            return out
    return None


def _tile(s: Source, m: FunctionModel, x: Loop, rows: int, cols: int) -> str | None:
    """The rewrite of the nest of row loop `x` (checked by `tile_reason`), or None."""
    # stays long: it writes the tiled nest (rows, outputs, leftovers, the collapse case) top
    # to bottom; its helpers are closures over the copies' names
    y = x.children[0]
    k = y.children[0]
    counters = {f"{n}@{lp.decl.start_byte}" for lp in (y, k) if lp.decl is not None
                for n, _, _, _ in declarators(lp.decl)}
    row_locals = body_locals(x.body) - counters - body_locals(y.body)
    out_locals = body_locals(y.body) - counters
    taken = {n.text.decode() for n in walk(m.fn) if n.type == "identifier"}
    tags = {_tag(r, c) for r in range(rows) for c in range(cols)} - {""}
    if any(f"{key.split('@')[0]}{t}" in taken for key in row_locals | out_locals
           for t in tags):
        return None  # a copy's name is taken
    xh = jam_header(s, m, x, rows, taken)
    yh_ = jam_header(s, m, y, cols, taken | {xh[4]} if xh else taken) if cols > 1 \
        else None
    if xh is None or (cols > 1 and yh_ is None):
        return None
    var, init, start, end, lim, cmp, lim_text = xh
    red = check_loop(m, k, allow_reductions=True).reductions
    coll = _collapse_parent(s, x)
    outer = coll[0] if coll is not None else x
    ind = s.indent_of(outer.node)
    st1 = ind + "    "
    base = st1 + ("    " if coll is not None else "")

    def names(r: int, c: int) -> dict[str, str]:
        out = {key: key.split("@")[0] + _tag(r, 0) for key in row_locals} if r else {}
        if r or c:
            out.update({key: key.split("@")[0] + _tag(r, c) for key in out_locals})
        return out

    def block(sts: list[Node], at: str, tiles: list[tuple[int, int]]) -> str:
        return "".join(
            f"{at}{copy_text(m, st, [(x, f'({var} + {r})' if r else None), (y, f'({y.var} + {c})' if c else None)], names(r, c))}\n"
            for r, c in tiles for st in sts if st.type != "preproc_call")

    xs, ys = statements(x.body), statements(y.body)
    pre_x = [st for st in xs if st.end_byte <= y.node.start_byte]
    post_x = [st for st in xs if st.start_byte >= y.node.end_byte]
    pre_y = [st for st in ys if st.end_byte <= k.node.start_byte]
    post_y = [st for st in ys if st.start_byte >= k.node.end_byte]
    kh = s.data[k.node.start_byte:k.body.start_byte].decode().rstrip()

    def nest(at: str, header: str, tiles: list[tuple[int, int]]) -> str:
        accs = [r_ + _tag(r, c) for r_ in red for r, c in tiles]
        return (f"{at}{header} {{\n"
                f"{block(pre_y, at + '    ', tiles)}"
                f"#pragma omp simd reduction(+ : {', '.join(accs)})\n"
                f"{at}    {kh} {{\n"
                f"{block(statements(k.body), at + '        ', tiles)}"
                f"{at}    }}\n"
                f"{block(post_y, at + '    ', tiles)}"
                f"{at}}}\n")

    one_col = [(r, 0) for r in range(rows)]
    lv1 = base + "    "
    if cols > 1:
        yvar, yinit, ystart, yend, ylim, ycmp, ylim_text = yh_
        tiles = [(r, c) for r in range(rows) for c in range(cols)]
        outputs = (
            f"{lv1}{{  {JAM_MARK} {cols}\n"
            f"{lv1}    {ylim_text}\n"
            + nest(lv1 + "    ", f"for ({yinit} = {ystart}; {yvar} < {ylim}; {yvar} += "
                                 f"{cols})", tiles)
            + nest(lv1 + "    ", f"for ({yinit} = {ylim}; {yvar} {ycmp} {yend}; "
                                 f"++{yvar})", one_col)
            + f"{lv1}}}\n")
    else:
        outputs = nest(lv1, s.data[y.node.start_byte:y.body.start_byte].decode().rstrip(),
                       one_col)
    jammed = (
        f"{base}for ({init} = {start}; {var} < {lim}; {var} += {rows}) {{\n"
        f"{block(pre_x, lv1, one_col)}"
        f"{outputs}"
        f"{block(post_x, lv1, one_col)}"
        f"{base}}}\n")
    shift = "\n" + " " * (len(base) - len(s.indent_of(x.node)))
    rest = (f"{base}for ({init} = {lim}; {var} {cmp} {end}; ++{var}) "
            f"{s.text_of(x.body).replace(chr(10), shift)}\n")
    mark = f"{{  {ROW_MARK} {rows}" + (f", outputs by {cols}" if cols > 1 else "")
    first = collapsed_worksharing(s, x)
    if coll is None and first is not None:
        # the groups of rows threaded as they are (the outputs inside are no longer a
        # perfect nest), the leftover rows under the source's collapse
        text = (f"{mark}\n{st1}{lim_text}\n#pragma {first[0]}\n{jammed}"
                f"#pragma {first[1]}\n{rest}{ind}}}")
    elif coll is None:
        par = worksharing(s, x)
        text = (f"{mark}\n{st1}{lim_text}\n"
                + (f"#pragma {par}\n" if par else "") + jammed + rest + f"{ind}}}")
    else:
        ph = s.data[outer.node.start_byte:outer.body.start_byte].decode().rstrip()
        left = f"#pragma {coll[1]}\n{st1}{ph} {{\n{rest}{st1}}}"
        left = indented(left)
        text = (f"{mark}\n{st1}{lim_text}\n"
                f"#pragma {coll[1]}\n{st1}{ph} {{\n{jammed}{st1}}}\n"
                f"{st1}if ({lim} {cmp} {end}) {{  // the leftover rows\n{left}\n{st1}}}\n"
                f"{ind}}}")
    at = pragmas_before(outer.node)
    start_b = s.line_start(at[0]) if at else outer.node.start_byte
    # what the rows' independence rests on (a leading dimension no smaller than the row:
    # `ldc >= N`), tested before the tile; the code as it was otherwise
    conds = check_loop(m, x, allow_reductions=False, assume=True).assume
    if conds:
        old = s.data[start_b:outer.node.end_byte].decode()
        text = versioned(ind, conds, ind + text, old if at else ind + old)[len(ind):]
    return finish(s, [Edit(start_b, outer.node.end_byte, (ind if at else "") + text)])


def register_tile(src: str, entry: str, rows: int = 4, cols: int = 4) -> str | None:
    """Tile every dot-product nest of `entry` with its row loop: `rows` rows x `cols`
    outputs (see the module docstring); None where no row loop can be jammed."""
    if rows < 2 or cols < 1 or model_of(src, entry) is None:
        return None
    return repeat(src, entry, lambda s, m: _row_jam_once(s, m, rows, cols))


def tile_reasons(src: str, entry: str) -> list[str]:
    """Why no row loop of `entry` can be jammed, one reason per 3-deep nest."""
    got = model_of(src, entry)
    if got is None:
        return []
    _, m = got
    return [r for x in m.loops
            if x.children and x.children[0].children and
            (r := tile_reason(m, x)) is not None]


def why_not(kf: KernelFile) -> str:
    return per_entry(kf, tile_reasons, "no dot-product nest inside a loop over rows")
