"""Array shapes from the code: declared extents (`double A[M][N]`, C99 `float C[n][m]`) and
the largest subscript the loops reach (`x[j*filters*spatial + i*spatial + k]` under
`j < batch, i < filters, k < spatial` needs batch*filters*spatial elements).

An inferred shape is what `--shape` would have said; a given `--shape` overrides it and is
checked against the code on every case (typical and generated): rows that are not the
declared row length (the code strides by N, the shape by n) or fewer elements than the
subscripts reach are an error naming the array, never a silent out-of-bounds read.
Subscripts the analysis cannot bound (an index read from memory, an array handed to a
call) are neither used nor checked; the array then needs `--shape`.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

from kernelcrew.errors import ExprError, InputError
from kernelcrew.kernels.expr import evaluate, names_in, without_int_suffixes
from kernelcrew.kernels.importer.access import Access, Accesses, Loop
from kernelcrew.kernels.importer.poly import Poly
from kernelcrew.kernels.importer.source import Param


@dataclass
class Need:
    """What the code asks of one array parameter."""

    name: str
    rows: list[str]  # declared extents after the first, as op.yaml expressions
    extent0: str | None  # the declared first extent, or None
    first: list[tuple[Poly, Access]] = field(default_factory=list)  # one past the largest
    guarded: list[tuple[Poly, Access]] = field(default_factory=list)  # ... under conditions
    unknown: str = ""  # why some accesses cannot be bounded
    declared: str = ""  # the declaration as the compiler sees it, for messages


def dim_expr(text: str, sizes: set[str]) -> str | None:
    """A declared extent (macros expanded: `1900 + 0`, `n`) as an op.yaml expression."""
    t = re.sub(r"\(\s*(?:int|long|size_t|unsigned|long long)\s*\)", "", text).strip()
    t = without_int_suffixes(t)
    if not t or not re.fullmatch(r"[\w\s+\-*/%()]+", t):
        return None
    t = re.sub(r"(?<![/])/(?![/])", "//", t)
    try:
        if names_in(t) - sizes:
            return None
        if not names_in(t):
            return str(evaluate(t, {}))
    except (ExprError, ZeroDivisionError):
        return None
    return " ".join(t.split())


def bound(p: Poly | None, loops: list[Loop]) -> Poly | None:
    """The largest value of `p` over the loop nest, or None where it cannot be bounded."""
    if p is None:
        return None
    for lp in reversed(loops):
        if lp.var not in p.names():
            continue
        if lp.lo is None or lp.hi is None or p.degree_in(lp.var) > 1:
            return None
        a, _b = p.split(lp.var)
        s = a.sign()
        if s > 0:
            p = p.substitute(lp.var, lp.hi - Poly.const(1))
        elif s < 0:
            p = p.substitute(lp.var, lp.lo)
        else:
            return None
    if p.names() & {lp.var for lp in loops}:
        return None
    return p


def needs(params: list[Param], acc: Accesses, sizes: set[str]) -> dict[str, Need]:
    out: dict[str, Need] = {}
    for p in params:
        rows = [dim_expr(d, sizes) for d in p.dims]
        extent0 = dim_expr(p.extent0, sizes) if p.extent0 else None
        n = Need(p.name, [r if r is not None else "?" for r in rows], extent0,
                 declared=p.text)
        if any(r is None for r in rows):
            n.unknown = f"its declared extents {p.dims} are not constants or sizes"
        for a in acc.of(p.name):
            if len(a.index) != 1 + len(p.dims):
                n.unknown = n.unknown or f"line {a.line} indexes it with {len(a.index)} " \
                                         "subscripts"
                continue
            m = bound(a.index[0], a.loops)
            if a.limit is not None:  # a condition around it bounds the subscript
                lim = bound(a.limit - Poly.const(1), a.loops)
                m = lim if lim is not None else m
            if m is None:
                if not a.guarded:
                    n.unknown = n.unknown or f"line {a.line}: a subscript the loops do not bound"
                continue
            (n.guarded if a.guarded else n.first).append((m + Poly.const(1), a))
        for e in acc.escapes:
            if e.array == p.name:
                n.unknown = n.unknown or f"it is {e.how}"
        out[p.name] = n
    return out


def combine(polys: list[Poly], atoms: dict[str, str]) -> str:
    uniq: list[Poly] = []
    for q in polys:
        if all((q - u).terms for u in uniq):
            uniq.append(q)
    # q covers u where q - u >= 0 for sizes >= 1 (`size` covers the `1` of an `x[0]`)
    top = [q for q in uniq if all(min((q - u).at_least_one().terms.values(), default=0) >= 0
                                  for u in uniq if u is not q)]
    if top:
        return top[0].expr(atoms)
    return "max(" + ", ".join(q.expr(atoms) for q in uniq) + ")"


def inferred_shape(n: Need, atoms: dict[str, str]) -> list[str] | None:
    """[first, *rows] from the declaration and the subscripts, or None."""
    if "?" in n.rows:
        return None
    if n.extent0 is not None:
        return [n.extent0, *n.rows]
    if n.unknown:
        return None
    got = n.first or n.guarded
    if not got:
        return None
    return [combine([q for q, _a in got], atoms), *n.rows]


def _values(case: dict[str, int], atoms: dict[str, str]) -> dict[str, int] | None:
    vals = dict(case)
    try:
        for k, e in atoms.items():
            vals[k] = evaluate(e, case)
    except (ExprError, ZeroDivisionError):
        return None
    return vals


def _numel(dims: list[str], case: dict[str, int]) -> int:
    return math.prod(evaluate(d, case) for d in dims)


def check(n: Need, dims: list[str], given: bool, cases: list[tuple[str, dict[str, int]]],
          atoms: dict[str, str], inferred: list[str] | None, path: object = None) -> None:
    """Raise where the code indexes `n.name` outside `dims` on one of the cases (the
    error names `path`, the file)."""
    flag = (f"--shape {n.name}={','.join(dims)}" if given
            else f"{n.name} (shape [{', '.join(dims)}] from its declaration)")
    if not given:
        hint = ("give cases within the declared extents, or the -D defines that size them "
                "(--define)")
    elif inferred:
        hint = f"leave --shape {n.name} out (inferred: [{', '.join(inferred)}])"
    else:
        hint = f"give --shape {n.name}=EXPR"
    rows = n.rows if "?" not in n.rows else None
    for label, case in cases:
        vals = _values(case, atoms)
        if vals is None:
            continue
        if rows and given:
            _check_rows(n, dims, rows, case, label, flag, hint, path)
        row_len = math.prod(evaluate(r, case) for r in rows) if rows else 1
        have = _numel(dims, case)
        for q, a in n.first:
            reach = q.evaluate(vals) * row_len
            if reach > have:
                raise InputError(
                    f"{flag}: line {a.line} of the file reaches element {reach - 1} of "
                    f"{n.name} in {label} ({_case_text(case)}), beyond the {have} the shape "
                    f"holds; {hint}", path=path)


def _check_rows(n: Need, dims: list[str], rows: list[str], case: dict[str, int], label: str,
                flag: str, hint: str, path: object) -> None:
    want = [evaluate(r, case) for r in rows]
    got_rows = dims[1:]
    if not got_rows:
        return  # a flat shape: only its size is checked
    got = [evaluate(d, case) for d in got_rows]
    same = got == want if len(got) == len(want) else math.prod(got) == math.prod(want)
    if not same:
        raise InputError(
            f"{flag}: {n.name} is declared `{n.declared}`, so the code strides by rows of "
            f"{' x '.join(map(str, want))} ({', '.join(rows)}), but the shape's rows hold "
            f"{' x '.join(map(str, got))} in {label} ({_case_text(case)}); {hint}", path=path)


def _case_text(case: dict[str, int]) -> str:
    return ",".join(f"{k}={v}" for k, v in case.items())
