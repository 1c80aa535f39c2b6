"""Integer polynomials over names, for the bounds of array subscripts.

A subscript such as `j*filters*spatial + i*spatial + k` is a polynomial in loop counters
and sizes; its largest value over a loop nest is found by putting each counter at the end
of its range that makes the polynomial larger (see shapes.py). What is not a polynomial
(`(h + 2*pad - k)/stride + 1`) is kept whole as an atom: a name that stands for the
expression, assumed non-negative like a size, so the result still prints as an op.yaml
expression.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field

Monomial = tuple[str, ...]  # sorted names, repeated for powers; () is the constant


@dataclass(frozen=True)
class Poly:
    terms: dict[Monomial, int] = field(default_factory=dict)

    @staticmethod
    def const(c: int) -> Poly:
        return Poly({(): c} if c else {})

    @staticmethod
    def name(n: str) -> Poly:
        return Poly({(n,): 1})

    def __add__(self, other: Poly) -> Poly:
        out = dict(self.terms)
        for m, c in other.terms.items():
            out[m] = out.get(m, 0) + c
        return Poly({m: c for m, c in out.items() if c})

    def __neg__(self) -> Poly:
        return Poly({m: -c for m, c in self.terms.items()})

    def __sub__(self, other: Poly) -> Poly:
        return self + (-other)

    def __mul__(self, other: Poly) -> Poly:
        out: dict[Monomial, int] = {}
        for m1, c1 in self.terms.items():
            for m2, c2 in other.terms.items():
                m = tuple(sorted(m1 + m2))
                out[m] = out.get(m, 0) + c1 * c2
        return Poly({m: c for m, c in out.items() if c})

    def names(self) -> set[str]:
        return {n for m in self.terms for n in m}

    def constant(self) -> int | None:
        """The value when the polynomial has no names, else None."""
        if all(m == () for m in self.terms):
            return self.terms.get((), 0)
        return None

    def degree_in(self, n: str) -> int:
        return max((m.count(n) for m in self.terms), default=0)

    def split(self, n: str) -> tuple[Poly, Poly]:
        """(a, b) with self = a*n + b, for a polynomial of degree one in n."""
        a: dict[Monomial, int] = {}
        b: dict[Monomial, int] = {}
        for m, c in self.terms.items():
            if n in m:
                rest = list(m)
                rest.remove(n)
                a[tuple(rest)] = c
            else:
                b[m] = c
        return Poly(a), Poly(b)

    def substitute(self, n: str, value: Poly) -> Poly:
        out = Poly()
        for m, c in self.terms.items():
            term = Poly.const(c)
            for x in m:
                term = term * (value if x == n else Poly.name(x))
            out = out + term
        return out

    def sign(self) -> int:
        """1 when every coefficient is >= 0 (so the value is >= 0 for non-negative names),
        -1 when every one is <= 0, 0 when mixed or zero."""
        cs = list(self.terms.values())
        if cs and all(c > 0 for c in cs):
            return 1
        if cs and all(c < 0 for c in cs):
            return -1
        return 0

    def at_least_one(self) -> Poly:
        """The polynomial with every name n written as n + 1: its coefficients are all >= 0
        exactly when it is >= 0 for every name >= 1 (sizes are)."""
        out = self
        for n in self.names():
            out = out.substitute(n, Poly.name(n) + Poly.const(1))
        return out

    def evaluate(self, values: dict[str, int]) -> int:
        total = 0
        for m, c in self.terms.items():
            v = c
            for n in m:
                v *= values[n]
            total += v
        return total

    def expr(self, atoms: dict[str, str] | None = None) -> str:
        """An op.yaml expression; atoms print as their (parenthesized) expressions."""
        atoms = atoms or {}
        if not self.terms:
            return "0"

        def mono(m: Monomial) -> str:
            return "*".join(f"({atoms[n]})" if n in atoms else n for n in m)

        ordered = sorted(self.terms.items(), key=lambda mc: (mc[1] < 0, -len(mc[0]), mc[0]))
        out = ""
        for m, c in ordered:
            body = mono(m)
            mag = abs(c)
            text = (str(mag) if not body else body if mag == 1 else f"{mag}*{body}")
            if not out:
                out = text if c > 0 else f"-{text}"
            else:
                out += f" + {text}" if c > 0 else f" - {text}"
        return out

    def __str__(self) -> str:
        return self.expr()


def from_expr(text: str, atoms: dict[str, str] | None = None) -> Poly | None:
    """An op.yaml expression as a polynomial; with `atoms`, a part that is not one (`//`,
    a call) becomes a name standing for its text, added to `atoms`."""
    try:
        tree = ast.parse(text.strip(), mode="eval").body
    except SyntaxError:
        return None
    return _from_ast(tree, atoms)


def _from_ast(n: ast.expr, atoms: dict[str, str] | None) -> Poly | None:
    if isinstance(n, ast.Constant) and type(n.value) is int:
        return Poly.const(n.value)
    if isinstance(n, ast.Name):
        return Poly.name(n.id)
    if isinstance(n, ast.UnaryOp) and isinstance(n.op, ast.USub | ast.UAdd):
        p = _from_ast(n.operand, atoms)
        return None if p is None else (-p if isinstance(n.op, ast.USub) else p)
    if isinstance(n, ast.BinOp) and isinstance(n.op, ast.Add | ast.Sub | ast.Mult):
        a, b = _from_ast(n.left, atoms), _from_ast(n.right, atoms)
        if a is None or b is None:
            return None
        return a + b if isinstance(n.op, ast.Add) else a - b if isinstance(n.op, ast.Sub) \
            else a * b
    if atoms is None:
        return None
    if isinstance(n, ast.BinOp):  # // and %: simplify each side, keep the operation whole
        left, right = (_simplified(x, atoms) for x in (n.left, n.right))
        text = f"{_wrap(left)} {'//' if isinstance(n.op, ast.FloorDiv) else '%'} {_wrap(right)}"
    else:
        text = ast.unparse(n)
    name = next((k for k, v in atoms.items() if v == text), f"_atom{len(atoms)}")
    atoms[name] = text
    return Poly.name(name)


def _simplified(n: ast.expr, atoms: dict[str, str]) -> str:
    p = _from_ast(n, atoms)
    return p.expr(atoms) if p is not None else ast.unparse(n)


def _wrap(text: str) -> str:
    return text if re.fullmatch(r"[\w.]+", text) else f"({text})"


def simplify(text: str) -> str:
    """`(n - 1) - (1)` as `n - 2`; `//` and calls kept whole, their sides simplified."""
    atoms: dict[str, str] = {}
    p = from_expr(text, atoms)
    return p.expr(atoms) if p is not None else " ".join(text.split())
