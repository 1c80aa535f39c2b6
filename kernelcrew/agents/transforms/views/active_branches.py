"""The branches of `#if` the kernel compiles, alone, inside the function's body.

Libraries that run on several targets keep one function with a path per target:

    float32_t sum;
    #if defined(ARM_MATH_NEON)
        ... NEON intrinsics ...
    #else
        for (i = 0U; i < n; i++) { sum = 0.0f; ... }
    #endif

The parser reads every branch, so the analysis sees the declarations and the loops of all
of them: a name declared in one branch is "declared outside the function" to the loop in
another, and a move may rewrite a loop the build never compiles. Where every condition of
an `#if` group in the function's body can be decided from the kernel's own text, the view
keeps the branch the compiler takes and sets the directives and the other branches aside,
line for line (each becomes a marker comment naming its row, so line numbers stay the
file's); `restore_branches` puts them back into a move's result, so the kernel and the
patch to the code base keep every target's path, untouched. Decided are: `defined(X)`, `#ifdef`, `#ifndef`
and integer expressions of macros the text defines before the function (`#define`/`#undef`
at the top level, the importer writes the ones the build selects) or never defines (0, as
the preprocessor reads them). A name the compiler or the command line may define
(`__AVX2__`, `_OPENMP`, any `__x`/`_X` name) leaves its group as it is, and so does a
macro defined to something other than an integer, or under `#ifndef` of its own name (a
knob: the compile line sets it with -D). A wrong decision could only leave a move on a
branch the build does not take: the directives go back with the markers.
"""

from __future__ import annotations

import functools
import re

from kernelcrew.csource.syntax import Source, find_function
from kernelcrew.kernels.expr import without_int_suffixes

_DIRECTIVE = re.compile(r"^\s*#\s*(if|ifdef|ifndef|elif|else|endif|define|undef)\b(.*)$")
_INT = re.compile(r"^\s*\(?\s*([0-9]+)[uUlL]*\s*\)?\s*$")
_KNOWN = {"__cplusplus": 1}  # the kernel is compiled as C++
KNOB = "<a knob>"  # a macro's value the compile line may set (-D overrides its #ifndef)
MARK = "// kernelcrew: another target's line "  # + the row it stands for
_MARKED = re.compile(r"^[ \t]*// kernelcrew: another target's line (\d+)[ \t]*$",
                     re.MULTILINE)


class Undecided(Exception):
    """A condition the text alone does not decide."""


def _reserved(name: str) -> bool:
    return name.startswith("__") or bool(re.match(r"_[A-Z]", name))


def _value(name: str, macros: dict[str, str | None]) -> int:
    if name in _KNOWN:
        return _KNOWN[name]
    if name in macros:
        v = macros[name]
        m = _INT.match(v or "")
        if v is None or m is None:
            raise Undecided(name)  # function-like, empty or not an integer
        return int(m.group(1))
    if _reserved(name):
        raise Undecided(name)  # the compiler or the command line may define it
    return 0


def _defined(name: str, macros: dict[str, str | None]) -> int:
    if name in _KNOWN or name in macros:
        return 1
    if _reserved(name):
        raise Undecided(name)
    return 0


def decide(cond: str, macros: dict[str, str | None]) -> bool:
    """An `#if` condition's truth, from the macros defined so far (name -> its value, None
    for a function-like one); Undecided where it cannot be decided."""
    text = re.sub(r"/\*.*?\*/|//.*$", " ", cond)
    text = re.sub(r"\bdefined\s*\(\s*(\w+)\s*\)|\bdefined\s+(\w+)",
                  lambda m: f" {_defined(m.group(1) or m.group(2), macros)} ", text)
    text = without_int_suffixes(text)
    text = re.sub(r"\b[A-Za-z_]\w*\b", lambda m: f" {_value(m.group(0), macros)} ", text)
    tokens = re.findall(r"\d+|&&|\|\||==|!=|<=|>=|[()!<>+\-*/%]|\S", text)
    p = _Parser(tokens)
    v = p.expr(0)
    if p.k != len(tokens):
        raise Undecided(cond)
    return v != 0


# C's binary operators of the preprocessor's arithmetic, loosest first
_LEVELS = (("||",), ("&&",), ("==", "!="), ("<", ">", "<=", ">="), ("+", "-"),
           ("*", "/", "%"))


class _Parser:
    """Integer expressions with C's precedence: || && (== !=) (< > <= >=) (+ -) (* / %),
    unary ! - +, parentheses."""

    def __init__(self, tokens: list[str]) -> None:
        self.t, self.k = tokens, 0

    def peek(self) -> str | None:
        return self.t[self.k] if self.k < len(self.t) else None

    def expr(self, level: int) -> int:
        if level == len(_LEVELS):
            return self.unary()
        v = self.expr(level + 1)
        while self.peek() in _LEVELS[level]:
            op = self.t[self.k]
            self.k += 1
            w = self.expr(level + 1)
            v = _apply(op, v, w)
        return v

    def unary(self) -> int:
        tok = self.peek()
        if tok is None:
            raise Undecided("end")
        self.k += 1
        if tok == "!":
            return int(not self.unary())
        if tok == "-":
            return -self.unary()
        if tok == "+":
            return self.unary()
        if tok == "(":
            v = self.expr(0)
            if self.peek() != ")":
                raise Undecided("(")
            self.k += 1
            return v
        if tok.isdigit():
            return int(tok)
        raise Undecided(tok)


def _apply(op: str, a: int, b: int) -> int:
    if op in ("/", "%") and b == 0:
        raise Undecided("division by zero")
    return {"||": lambda: int(bool(a) or bool(b)), "&&": lambda: int(bool(a) and bool(b)),
            "==": lambda: int(a == b), "!=": lambda: int(a != b), "<": lambda: int(a < b),
            ">": lambda: int(a > b), "<=": lambda: int(a <= b), ">=": lambda: int(a >= b),
            "+": lambda: a + b, "-": lambda: a - b, "*": lambda: a * b,
            "/": lambda: int(a / b), "%": lambda: a - b * int(a / b)}[op]()


@functools.lru_cache(maxsize=32)
def active_branches(src: str, entry: str) -> str | None:
    """`src` with each decidable `#if` group inside `entry`'s body reduced to the branch
    the compiler takes (module docstring); None where there is none."""
    s = Source(src)
    fn = find_function(s, entry)
    body = fn.child_by_field_name("body") if fn is not None else None
    if body is None:
        return None
    first, last = body.start_point.row, body.end_point.row
    lines = src.split("\n")
    macros: dict[str, str | None] = {}
    # per open group: (decided, taken so far, this branch taken, start row, directive rows,
    # rows of the branches not taken)
    stack: list[dict] = []
    blank: set[int] = set()
    uncertain = False  # a #define or #undef under a condition not decided

    def live() -> bool:
        return all(g["on"] for g in stack)

    k = 0
    while k < len(lines):
        row, line = k, lines[k]
        # a directive continued with `\`
        while line.rstrip().endswith("\\") and k + 1 < len(lines):
            k += 1
            line = line.rstrip()[:-1] + " " + lines[k]
        rows = list(range(row, k + 1))
        k += 1
        m = _DIRECTIVE.match(line)
        if m is None:
            if stack and not live():
                _off(stack, rows)
            continue
        word, rest = m.group(1), m.group(2).strip()
        if word in ("define", "undef"):
            if live() and not all(g["decided"] for g in stack):
                uncertain = True
            if live() and all(g["decided"] for g in stack):
                name = re.match(r"(\w+)(\()?\s*(.*)$", rest)
                if name:
                    if word == "undef":
                        macros.pop(name.group(1), None)
                    elif any(g.get("guard") == name.group(1) for g in stack):
                        # `#ifndef K` / `#define K v`: a knob the build may set with -D
                        macros[name.group(1)] = KNOB
                    else:
                        macros[name.group(1)] = None if name.group(2) else name.group(3).strip()
            elif stack and not live():
                _off(stack, rows)
            continue
        if word in ("if", "ifdef", "ifndef"):
            if stack and not live():
                _off(stack, rows)
                stack.append({"decided": False, "taken": True, "on": False, "inner": True,
                              "rows": [], "off_rows": [], "start": row})
                continue
            try:
                cond = rest if word == "if" else \
                    f"{'!' if word == 'ifndef' else ''}defined({rest.split()[0]})"
                on = None if uncertain else decide(cond, macros)
            except (Undecided, IndexError):
                on = None
            stack.append({"decided": on is not None, "taken": bool(on), "on": on is not False,
                          "inner": False, "rows": rows, "off_rows": [], "start": row,
                          "guard": rest.split()[0] if word == "ifndef" and rest else None})
            continue
        if not stack:
            continue
        g = stack[-1]
        if g["inner"]:
            if word == "endif":
                stack.pop()
            if stack and not live():
                _off(stack, rows)
            continue
        if word in ("elif", "else"):
            g["rows"] += rows
            if not g["decided"]:
                continue
            if g["taken"]:
                g["on"] = False
                continue
            try:
                if uncertain:
                    raise Undecided(rest)
                on = decide(rest, macros) if word == "elif" else True
            except Undecided:
                g["decided"], g["on"] = False, True
                continue
            g["on"], g["taken"] = on, on
            continue
        if word == "endif":
            g["rows"] += rows
            stack.pop()
            if g["decided"] and first < g["start"] and rows[-1] < last:
                blank.update(g["rows"])
                blank.update(g["off_rows"])
            if stack and not live():
                _off(stack, rows)
    if not blank:
        return None
    out = [(f"{MARK}{i}" if i in blank else ln) for i, ln in enumerate(lines)]
    text = "\n".join(out)
    if text == src or Source(text).has_errors() and not s.has_errors():
        return None
    return text


def restore_branches(src: str, entry: str, out: str | None) -> str | None:
    """A move's result on this view with the lines the view set aside put back, each at
    its marker: the kernel (and the patch to the code base) keeps every target's path.
    A marker a move copied (a loop versioned with a group inside it) is put back in each
    copy; None where a marker was lost (the move rewrote a span holding one) or a copy
    holds part of a group: the result would drop another target's code or break it."""
    if out is None or MARK not in out:
        return out
    lines = src.split("\n")
    got = out.split("\n")
    seen: set[int] = set()
    for k, ln in enumerate(got):
        m = _MARKED.match(ln)
        if m is None:
            if MARK in ln:
                return None  # a marker inside a rewritten line
            continue
        row = int(m.group(1))
        if row >= len(lines):
            return None
        seen.add(row)
        got[k] = lines[row]
    want = {int(m.group(1)) for m in _MARKED.finditer(active_branches(src, entry) or "")}
    if seen != want:
        return None
    # a copied loop carries the groups inside it whole (both copies keep the other
    # target's lines); a copy holding part of a group would leave an #if open
    opened = sum(1 for ln in got if re.match(r"\s*#\s*if(n?def)?\b", ln))
    closed = sum(1 for ln in got if re.match(r"\s*#\s*endif\b", ln))
    return "\n".join(got) if opened == closed else None


def _off(stack: list[dict], rows: list[int]) -> None:
    """Rows inside a branch not taken: blanked with the group that holds them."""
    for g in stack:
        if not g["on"]:
            g["off_rows"] += rows
            return
