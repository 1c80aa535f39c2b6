"""The text the parsers (the importer's and the moves') read in place of the file: the same
bytes at the same offsets, with two things that stop a C grammar blanked out.

Code bases write declarations through macros the preprocessor removes or turns into a
qualifier, and through `#if` groups inside a declaration:

    void pitch_downsample(celt_sig * OPUS_RESTRICT x[], ...)   // OPUS_RESTRICT: restrict
    static FORCE_INLINE float dot(const float *a, ...)          // FORCE_INLINE: inline

    #ifdef FIXED_POINT
    opus_val32
    #else
    void
    #endif
    celt_pitch_xcorr_c(const opus_val16 *_x, ...)

A grammar that does not run the preprocessor reads an unknown word between `*` and a name,
or a return type split across `#if` branches, as an error, and the definition around it
is lost: the function is "not defined here". The mask blanks (spaces, same length):

- every use outside a directive of an object-like macro whose body is empty or only
  qualifiers and specifiers (`restrict`, `inline`, `static`, `const`, `__attribute__((...))`,
  ...): what the file's own `#define`s say, and what the caller knows from the
  preprocessor or the kernel that copied the definitions (`extra`);
- the directives of an `#if` group at the top level whose branches are fragments of one
  declaration (no `;`, `{`, `}` and no directive other than the group's own), and every
  branch but one: the one the build compiles where `active(line)` says, else the first.

Only the parse reads the mask; every text the importer copies is the original's, so a
group that straddles the start of an item is copied whole (`fragment_start`).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

# what an object-like macro may stand for and still be blanked for the parse
_QUALIFIERS = {
    "const", "volatile", "restrict", "__restrict", "__restrict__", "inline", "__inline",
    "__inline__", "__forceinline", "static", "extern", "register", "__extension__",
    "_Noreturn", "noexcept", "constexpr",
}
_DEFINE = re.compile(r"^[ \t]*#[ \t]*define[ \t]+([A-Za-z_]\w*)(?![\w(])(.*)$", re.MULTILINE)
_ATTRIBUTE = re.compile(r"__(?:attribute|declspec)__?\s*\(\((?:[^()]|\([^()]*\))*\)\)"
                        r"|__declspec\s*\((?:[^()]|\([^()]*\))*\)")
_DIRECTIVE = re.compile(r"^[ \t]*#[ \t]*(\w*)")
_IDENT = re.compile(r"[A-Za-z_]\w*")


def qualifier_body(body: str) -> bool:
    """The body of an object-like macro is empty or only qualifiers and attributes."""
    rest = _ATTRIBUTE.sub(" ", re.sub(r"/\*.*?\*/|//.*$", " ", body))
    words = rest.split()
    return all(w in _QUALIFIERS for w in words)


def qualifier_macros(text: str) -> set[str]:
    """The object-like macros `text` defines as nothing or as qualifiers only."""
    joined = text.replace("\\\n", " ")
    return {m.group(1) for m in _DEFINE.finditer(joined) if qualifier_body(m.group(2))}


def restrict_macros(text: str) -> set[str]:
    """The object-like macros `text` defines as a restrict qualifier (`# define
    OPUS_RESTRICT restrict`): a pointer declared with one is restrict already."""
    joined = text.replace("\\\n", " ")
    return {m.group(1) for m in _DEFINE.finditer(joined) if qualifier_body(m.group(2))
            and {"restrict", "__restrict", "__restrict__"} & set(m.group(2).split())}


@dataclass
class Masked:
    text: str  # what the parser reads
    groups: list[tuple[int, int]] = field(default_factory=list)  # blanked #if groups
    macros: set[str] = field(default_factory=set)  # the qualifier macros blanked

    def uses(self, data: bytes, start: int, end: int) -> set[str]:
        """The blanked macros the original text start..end uses (the parse does not see
        them, the closure must copy their definitions)."""
        if not self.macros:
            return set()
        words = set(_IDENT.findall(data[start:end].decode(errors="replace")))
        return words & self.macros

    def fragment_start(self, start: int) -> int:
        """`start` moved back to the `#if` of a blanked group it falls inside."""
        for a, b in self.groups:
            if a < start < b:
                return a
        return start


def _blank(s: str) -> str:
    return re.sub(r"[^\n]", " ", s)


def mask(text: str, extra: Iterable[str] = (),
         active: Callable[[int], bool] | None = None) -> Masked:
    """`text` as the parser reads it (module docstring)."""
    if active is None:
        return _mask_cached(text, frozenset(extra))
    return _mask(text, extra, active)


@functools.lru_cache(maxsize=256)
def _mask_cached(text: str, extra: frozenset[str]) -> Masked:
    return _mask(text, extra, None)


def _mask(text: str, extra: Iterable[str], active: Callable[[int], bool] | None) -> Masked:
    macros = qualifier_macros(text) | set(extra)
    lines = text.split("\n")
    out = list(lines)
    directive = [False] * len(lines)
    cont = False
    for i, ln in enumerate(lines):
        directive[i] = cont or ln.lstrip().startswith("#")
        cont = directive[i] and ln.rstrip().endswith("\\")
    if macros:
        for i, ln in enumerate(lines):
            if not directive[i]:
                out[i] = _IDENT.sub(lambda m: " " * len(m.group(0)) if m.group(0) in macros
                                    else m.group(0), ln)
    offsets = [0]
    for ln in lines:
        offsets.append(offsets[-1] + len(ln.encode()) + 1)
    spans = []
    for g in _blanked_groups(out, directive):
        keep = 0
        if active is not None:
            keep = next((k for k, (a, b) in enumerate(g.branches)
                         if any(active(j + 1) for j in range(a, b))), 0)
        for j in [g.start, g.end] + [a - 1 for a, _ in g.branches[1:]]:
            out[j] = _blank(out[j])
        for k, (a, b) in enumerate(g.branches):
            if k != keep:
                for j in range(a, b):
                    out[j] = _blank(out[j])
        if g.depth == 0:
            spans.append((offsets[g.start], offsets[g.end + 1] - 1))
    masked = "\n".join(out)
    if len(masked.encode()) != len(text.encode()):
        return Masked(text)  # never shift an offset (a multi-byte character blanked)
    return Masked(masked, spans, macros)


@dataclass
class _Group:
    start: int  # the line of `#if`
    branches: list[tuple[int, int]]  # each branch's lines [a, b), nested groups included
    end: int  # the line of `#endif`
    depth: int  # braces open where it starts
    nested: bool  # holds a directive other than its own (a group, a #define, ...)


def _groups(lines: list[str], directive: list[bool]) -> list[_Group]:
    """Every complete `#if` group of the file."""
    out: list[_Group] = []
    stack: list[list] = []  # [start, branches, branch start, depth, nested]
    depth, comment = 0, False
    for i, ln in enumerate(lines):
        if directive[i]:
            m = _DIRECTIVE.match(ln)
            kind = m.group(1) if m else ""
            if kind in ("if", "ifdef", "ifndef"):
                if stack:
                    stack[-1][4] = True
                stack.append([i, [], i + 1, depth, False])
            elif kind in ("elif", "else", "elifdef", "elifndef") and stack:
                stack[-1][1].append((stack[-1][2], i))
                stack[-1][2] = i + 1
            elif kind == "endif" and stack:
                s, br, a, d, n = stack.pop()
                out.append(_Group(s, br + [(a, i)], i, d, n))
            elif stack and m is not None:
                stack[-1][4] = True
            continue
        code, comment = _code_of(ln, comment)
        depth += code.count("{") - code.count("}")
    return out


def _braces(lines: list[str], directive: list[bool], a: int, b: int) -> tuple[int, int, bool]:
    """(braces opened minus closed, braces seen, whether a `;`) over code lines a..b-1."""
    net, seen, semi, comment = 0, 0, False, False
    for j in range(a, b):
        if directive[j]:
            continue
        code, comment = _code_of(lines[j], comment)
        net += code.count("{") - code.count("}")
        seen += code.count("{") + code.count("}")
        semi = semi or ";" in code
    return net, seen, semi


def _blanked_groups(lines: list[str], directive: list[bool]) -> list[_Group]:
    """The groups to blank: those whose branches hold only fragments of a declaration or a
    statement (no `;`, no braces, nothing nested); those with a branch that
    opens more braces than it closes or the other way round (a block begun under one
    `#if` and ended under another); the outermost of those, none inside another."""
    chosen: list[_Group] = []
    for g in sorted(_groups(lines, directive), key=lambda g: g.start):
        if any(c.start < g.start <= c.end for c in chosen):
            continue
        counts = [_braces(lines, directive, a, b) for a, b in g.branches]
        fragment = not g.nested and \
            any(b > a for a, b in g.branches) and \
            all(seen == 0 and not semi for _n, seen, semi in counts)
        if fragment or any(n != 0 for n, _s, _c in counts):
            chosen.append(g)
    return chosen


_STRIP = re.compile(r'/\*.*?\*/|"(?:\\.|[^"\\])*"|\'(?:\\.|[^\'\\])*\'')


def _code_of(line: str, comment: bool) -> tuple[str, bool]:
    """The line without comments and string literals; whether a block comment is open
    after it."""
    if comment:
        e = line.find("*/")
        if e < 0:
            return "", True
        line = line[e + 2:]
    if "/" not in line and '"' not in line and "'" not in line:
        return line, False
    line = _STRIP.sub(" ", line)
    k = line.find("//")
    if k >= 0:
        line = line[:k]
    k = line.find("/*")
    if k >= 0:
        return line[:k], True
    return line, False
