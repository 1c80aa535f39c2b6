"""Integer inputs that index other arrays get values that are valid indices.

A gather (`out[p] = grid[probe[p]]`), an embedding lookup (`x[j] = table[tok[i]*dim +
j]`, `table[tok[i]][j]`) or a scatter reads its integer input as positions in another
array. Drawn as `check` draws integers by default (small values, negative ones too),
such an input makes the function read outside its arrays: its float64 build and its
float32 build read different memory, and the baseline fails its own check, or crashes.
Where the code says how an integer input is used as a subscript, its values are drawn
from [0, extent) of the array it indexes, written to inputs.py like `--values`, which
still overrides (and is the way where the code does not show the range).

Read: an element of the input as a whole subscript (`A[X[i]]`, one dimension of
`A[X[i]][j]`), as a multiple of a size plus the rest (`A[X[i]*S + j]`, `A[S*X[i] + j]`,
extent // S), as the offset of a pointer into a float array (`row = A + X[i]*S`), and
through a local defined once from any of these (`int t = X[i]; A[t*S + j]`).
An input used against several arrays gets the smallest of their extents.
"""

from __future__ import annotations

import re

from kernelcrew.csource.syntax import subscript_index, uncast
from kernelcrew.kernels.importer.access import locals_defined_once
from kernelcrew.kernels.importer.roles import Role
from kernelcrew.kernels.importer.source import Node, walk


def _subscripts(n: Node) -> tuple[Node, list[Node]] | None:
    """(the array, its subscripts outermost first) of `A[i][j]`."""
    subs: list[Node] = []
    cur = n
    while cur.type == "subscript_expression":
        idx = subscript_index(cur)
        if idx is None:
            return None
        subs.insert(0, idx)
        cur = cur.child_by_field_name("argument") or cur.named_children[0]
    return (cur, subs) if subs and cur.type == "identifier" else None


def _over(extent: str, k: str) -> str:
    """`extent // k`, with k taken out of a product that has it (`rows*cols` by `cols`)."""
    factors = [f.strip() for f in extent.split("*")]
    if re.fullmatch(r"[\w\s*]+", extent) and k in factors:
        factors.remove(k)
        return "*".join(factors) or "1"
    return f"({extent}) // ({k})"


def index_ranges(fn: Node, data: bytes, roles: list[Role], given: set[str]
                 ) -> tuple[dict[str, tuple[str, list[str], str, str]], list[str]]:
    """({op.yaml input name: (dtype, shape, "0", HI)}, notes) for the integer inputs the
    code uses as subscripts of arrays whose shape is known; those in `given` (--values)
    are left alone."""
    def s(n: Node) -> str:
        return data[n.start_byte:n.end_byte].decode()

    by_name = {r.param.name: r for r in roles}
    ints = {r.param.name for r in roles if r.kind in ("input", "inout") and r.dtype
            and r.dtype[0] in "iu" and r.shape and r.param.name not in given}
    if not ints:
        return {}, []
    sizes = {r.param.name for r in roles if r.kind == "size"}
    defs, modified = locals_defined_once(fn, data)

    def index_of(n: Node | None, seen: frozenset[str] = frozenset()) -> str | None:
        """The integer input whose element `n` is, directly or through a local."""
        n = uncast(n)
        if n is None:
            return None
        if n.type == "identifier" and s(n) in defs and s(n) not in modified \
                and s(n) not in seen:
            return index_of(defs[s(n)], seen | {s(n)})
        got = _subscripts(n) if n.type == "subscript_expression" else None
        if got is not None and s(got[0]) in ints and len(got[1]) == 1:
            return s(got[0])
        return None

    def scaled(n: Node | None) -> tuple[str, str] | None:
        """(input, S) of `X[i]*S` or `S*X[i]`, S a size or a literal."""
        n = uncast(n)
        if n is None or n.type != "binary_expression" or \
                s(n.child_by_field_name("operator")) != "*":
            return None
        a, b = n.child_by_field_name("left"), n.child_by_field_name("right")
        for x, k in ((a, b), (b, a)):
            name, kb = index_of(x), uncast(k)
            if name and kb is not None and (s(kb) in sizes or re.fullmatch(r"\d+", s(kb))):
                return name, s(kb)
        return None

    found: dict[str, list[tuple[str, str]]] = {}  # input -> [(HI, the array it indexes)]

    def flat(arr: Role, sub: Node | None) -> None:
        """An offset into a flat array: `X[i]`, `X[i]*S`, either plus the rest."""
        direct = index_of(sub)
        if direct:
            found.setdefault(direct, []).append((arr.shape[0], arr.param.name))
            return
        b = uncast(sub)
        terms = [b]
        if b is not None and b.type == "binary_expression" and \
                s(b.child_by_field_name("operator")) == "+":
            terms = [b.child_by_field_name("left"), b.child_by_field_name("right")]
        for t in terms:
            sc = scaled(t)
            if sc:
                found.setdefault(sc[0], []).append((_over(arr.shape[0], sc[1]),
                                                    arr.param.name))

    for node in walk(fn):
        if node.type == "binary_expression" and s(node.child_by_field_name("operator")) == "+":
            # a pointer into an array at an offset: `float *row = table + ids[i] * d;`
            a, b = node.child_by_field_name("left"), node.child_by_field_name("right")
            for base, off in ((a, b), (b, a)):
                r = by_name.get(s(base)) if base is not None and base.type == "identifier" \
                    else None
                if r is not None and r.kind in ("input", "output", "inout") and \
                        len(r.shape) == 1 and r.dtype and r.dtype[0] not in "iu":
                    flat(r, off)
            continue
        if node.type != "subscript_expression" or (
                node.parent is not None and node.parent.type == "subscript_expression"
                and node.parent.child_by_field_name("argument") == node):
            continue  # the outermost of `A[i][j]` only
        got = _subscripts(node)
        if got is None or s(got[0]) not in by_name:
            continue
        arr, subs = by_name[s(got[0])], got[1]
        dims = arr.shape
        if not dims or arr.kind not in ("input", "output", "inout"):
            continue
        if len(subs) == 1 and len(dims) == 1:
            flat(arr, subs[0])
            continue
        for k, sub in enumerate(subs):
            direct = index_of(sub)
            if direct and len(subs) == len(dims):
                found.setdefault(direct, []).append((dims[k], arr.param.name))
    out, notes = {}, []
    for name, uses in found.items():
        his = list(dict.fromkeys(h for h, _ in uses))
        hi = his[0]
        for h in his[1:]:
            hi = f"min({hi}, {h})"
        r = by_name[name]
        key = f"{name}_in" if r.kind == "inout" else name
        out[key] = (r.dtype, r.shape, "0", hi)
        arrays = ", ".join(dict.fromkeys(a for _, a in uses))
        notes.append(f"{name}: its values index {arrays}: drawn from [0, {hi}) (give "
                     f"--values {name}=LO:HI to change)")
    return out, notes
