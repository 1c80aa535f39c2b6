"""A code answer in every form a model can give, and what the crew makes of it.

A model may answer the code step with a JSON object (moves, edits, kernel, ...), or in
plain text (small models write code far better than they escape it inside a JSON
string):

- moves of the catalogue: `MOVE: unroll factor=8` (or `unroll(factor=8)`,
  `unroll {"factor": 8}`), several on one line separated by `;`, or one per line;
- search/replace edits of the current best kernel:
      <<<<<<< SEARCH
      for (int64_t i = 0; i < n; ++i) y[i] = x[i] + z[i];
      =======
      ...
      >>>>>>> REPLACE
- a fenced code block with the kernel file, or only its source: the crew fills in the
  front matter it knows (entry, flags, knobs, launch) from the current best;
- a bare answer: the first of its lines that names one of the moves offered picks it
  (a small model's choice; a line naming several is no choice).

`read_text_answer` turns such text into the fields of the answer schema; the specialist
then applies the moves (`moves.apply_moves`), the edits (`apply_edits`) and completes the
front matter (`complete_front_matter`).
"""

from __future__ import annotations

import ast
import json
import re
from typing import Any

import yaml

from kernelcrew.errors import InputError
from kernelcrew.kernels.kernelfile import FrontMatter, parse_kernel_text, render

_FENCE = re.compile(r"```[ \t]*(?P<lang>[\w+#.-]*)[ \t]*\n(?P<body>.*?)(?:\n[ \t]*```|\Z)",
                    re.DOTALL)
_EDIT = re.compile(r"<{5,9}[ \t]*SEARCH[^\n]*\n(?P<search>.*?)\n?={5,9}[^\n]*\n"
                   r"(?P<replace>.*?)\n?>{5,9}[ \t]*REPLACE", re.DOTALL)
_MOVE_LINE = re.compile(r"\bmoves?\**[ \t]*[:=][ \t]*(?P<rest>.+)$", re.IGNORECASE | re.MULTILINE)
_FIELDS = {"bottleneck": "bottleneck", "plan": "plan", "kind": "kind",
           "expected_gain": "expected_gain", "gain": "expected_gain", "risks": "risks",
           "risk": "risks", "confidence": "confidence", "change_type": "change_type"}
_FIELD_LINE = re.compile(r"^[ \t*#-]*\**(?P<key>" + "|".join(_FIELDS) + r")\**[ \t]*[:=][ \t]*"
                         r"(?P<value>.*)$", re.IGNORECASE | re.MULTILINE)
_FRONT_ANYWHERE = re.compile(r"/\*\s*kernelcrew[ \t]*\n(?P<yaml>.*?)\*/[ \t]*\n?", re.DOTALL)
_CODE_LANGS = {"", "c", "cpp", "c++", "cc", "cxx", "cuda", "cu", "h", "hpp"}


def _value(text: str) -> Any:
    text = text.strip().strip(",")
    for read in (json.loads, ast.literal_eval):
        try:
            return read(text)
        except (ValueError, SyntaxError, TypeError):
            continue
    if text.startswith("[") and text.endswith("]"):  # [-O3, -march=native]: bare words
        return [w.strip().strip("'\"`") for w in text[1:-1].split(",") if w.strip()]
    return text.strip("'\"`")


def _params(text: str) -> dict[str, Any]:
    """`factor=8 rows=4`, `(factor=8, rows=4)` or `{"factor": 8}`."""
    text = text.strip().rstrip(".")
    if text.startswith("(") and text.endswith(")"):
        text = text[1:-1]
    if text.startswith("{"):
        v = _value(text)
        return v if isinstance(v, dict) else {}
    out: dict[str, Any] = {}
    for m in re.finditer(r"(\w+)\s*[=:]\s*(\[[^\]]*\]|\{[^}]*\}|\"[^\"]*\"|'[^']*'|[^\s,;]+)",
                         text):
        out[m.group(1)] = _value(m.group(2))
    return out


def _split_moves(text: str) -> list[str]:
    """Split at `;`, and at commas outside brackets that start a new move's name (not a
    parameter: `factor=8, rows=4` stays one move)."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth = max(0, depth - 1)
        elif depth == 0 and (ch == ";" or ch == "," and re.match(
                r"\s*[A-Za-z_][\w-]*\s*(?:$|[,;({]|\s+[A-Za-z_]\w*\s*[=:])", text[i + 1:])):
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return [p for p in parts if p.strip()]


def parse_moves(text: str) -> list[dict[str, Any]]:
    """`unroll factor=8; simd` -> [{"move": "unroll", "params": {"factor": 8}}, ...]."""
    parts = _split_moves(text.strip().strip("`"))
    out = []
    for part in parts:
        m = re.match(r"\s*`?(?P<name>[A-Za-z_][\w-]*)`?(?P<rest>.*)$", part.strip(),
                     re.DOTALL)
        if m:
            out.append({"move": m.group("name"), "params": _params(m.group("rest"))})
    return out


def read_text_answer(text: str, offered: list[str] | None = None) -> dict[str, Any] | None:
    """The answer's fields from plain text (see the module docstring); None when the text
    holds neither a move, an edit nor code. `offered`: the move names the prompt offered,
    read as a choice when the answer holds nothing else."""
    text = re.sub(r"<think>.*?</think>", "", text, flags=re.DOTALL)
    out: dict[str, Any] = {}
    for m in _FIELD_LINE.finditer(text):
        key = _FIELDS[m.group("key").lower()]
        value = m.group("value").strip()
        if key in ("expected_gain", "confidence"):
            num = re.search(r"\d+(?:\.\d+)?", value)
            if num:
                out.setdefault(key, float(num.group()))
        elif value:
            out.setdefault(key, value)
    moves = [mv for m in _MOVE_LINE.finditer(text) for mv in parse_moves(m.group("rest"))]
    edits = [{"search": m.group("search"), "replace": m.group("replace")}
             for m in _EDIT.finditer(text)]
    kernel = ""
    if not edits:
        blocks = [m.group("body") for m in _FENCE.finditer(text)
                  if m.group("lang").lower() in _CODE_LANGS and _looks_like_code(m.group("body"))
                  and (m.group(0).rstrip().endswith("```") or _balanced(m.group("body")))]
        kernel = max(blocks, key=len) if blocks else ""
        if not kernel and "/* kernelcrew" in text:  # unfenced, front matter and all
            rest = text[text.index("/* kernelcrew"):]
            kernel = rest if _balanced(rest) else ""
    if not (moves or edits or kernel) and offered:
        named = _named(text, offered)
        if named:
            moves = [{"move": named, "params": {}}]
    if not (moves or edits or kernel):
        return None
    out.update(moves=moves, edits=edits, kernel=kernel)
    return out


def _balanced(body: str) -> bool:
    """A fence left open (the answer cut off at the cap) counts only if its code is whole."""
    return body.count("{") == body.count("}") > 0


def _looks_like_code(body: str) -> bool:
    return bool(re.search(r"[{};]", body))


def _named(text: str, offered: list[str]) -> str | None:
    """The move a bare answer picks: the first line that names an offered move, when it
    names exactly one (a line naming several is a comparison, not a choice). A small
    model that echoes the list of moves picks its first entry this way."""
    for line in text.splitlines():
        low = line.lower()
        named = [n for n in offered
                 if re.search(rf"(?<![\w]){re.escape(n.lower())}(?![\w])", low)]
        if len(named) == 1:
            return named[0]
        if named:
            return None
    return None


def apply_edits(text: str, edits: list[dict[str, str]]) -> tuple[str | None, str]:
    """Each edit's search text replaced once in `text` (exactly, else line by line with
    the indentation ignored); (None, why) when one is not found or not unique."""
    for k, e in enumerate(edits, 1):
        search, replace = e.get("search", ""), e.get("replace", "")
        if not search.strip():
            return None, f"edit {k}: the SEARCH part is empty"
        n = text.count(search)
        if n == 1:
            text = text.replace(search, replace, 1)
            continue
        if n > 1:
            return None, (f"edit {k}: the SEARCH text occurs {n} times in the kernel; include "
                          "more lines so it is unique")
        found = _loose_find(text, search)
        if found is None:
            first = next((ln.strip() for ln in search.splitlines() if ln.strip()), "")
            return None, (f"edit {k}: the SEARCH text is not in the current kernel (its first "
                          f"line: {first[:100]!r}); copy the lines exactly")
        lo, hi = found
        lines = text.splitlines(keepends=True)
        text = "".join(lines[:lo]) + replace.rstrip("\n") + "\n" + "".join(lines[hi:])
    return text, ""


def _loose_find(text: str, search: str) -> tuple[int, int] | None:
    want = [ln.strip() for ln in search.strip("\n").splitlines()]
    have = [ln.strip() for ln in text.splitlines()]
    hits = [i for i in range(len(have) - len(want) + 1) if have[i:i + len(want)] == want]
    return (hits[0], hits[0] + len(want)) if len(hits) == 1 else None


def complete_front_matter(text: str, best_text: str, backend: str) -> str:
    """The kernel file with the front matter the crew knows filled in from the current
    best: all of it when the answer has none, else the entry (CPU), the launch plan (CUDA)
    and the flags when the answer's front matter leaves them out. A front matter written
    after some lines (includes first) is moved to the top."""
    be = "cuda" if backend == "cuda" else "cpu"
    try:
        parse_kernel_text(text, be)
        return text  # complete as written
    except InputError:
        pass
    try:
        best = parse_kernel_text(best_text, be).meta
    except InputError:
        return text
    done = _completed(text, best, be)
    try:
        parse_kernel_text(done, be)
    except InputError:
        return text  # no better: the parser's error on the model's own text goes back
    return done


def _completed(text: str, best: FrontMatter, be: str) -> str:
    m = _FRONT_ANYWHERE.search(text)
    if m is None:
        return render(best, text.strip("\n") + "\n")
    body = (text[:m.start()] + text[m.end():]).strip("\n") + "\n"
    try:
        data = yaml.safe_load(m.group("yaml")) or {}
    except yaml.YAMLError:
        return text  # left as written: the parser's own error goes back to the model
    if not isinstance(data, dict):
        return text
    if be == "cpu":
        data.setdefault("entry", best.entry)
    elif not data.get("launch"):
        data["launch"] = [lc.model_dump() for lc in best.launch]
    data.setdefault("flags", list(best.flags))
    if not data.get("knobs") and best.knobs and any(k in body for k in best.knobs):
        data["knobs"] = dict(best.knobs)
    try:
        meta = FrontMatter.model_validate(data)
    except ValueError:
        return text
    return render(meta, body)
