"""The catalogue of moves as the LLM crew uses it: list the moves with their docs, and
apply moves named with parameters, getting either the new kernel or the reason why not.

Everything here goes through the catalogue's public API, so a move an LLM names is
validated, applied and legality-checked by the same code the heuristic crew uses:

- `kernelcrew.agents.transforms.TRANSFORMS` (the registry: name -> Transform with kind,
  backends, doc, parameter defaults), `transform_names(backend)` and
  `apply_transform(name, text, params)` (None when the move does not apply; params
  "then" chains further moves, each of which must apply; this is what `apply_change`
  replays, so a proposal made of moves merges and replays like a heuristic one);
- the catalogue's `not_applicable(text)` (move -> why it does not apply to this text),
  read from the package's top level when it is exported there, else from its
  `catalogue` module. It is the one import to re-point when the package is reorganized.
"""

from __future__ import annotations

import hashlib
import re
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

from kernelcrew.agents.transforms import TRANSFORMS, apply_transform, transform_names
from kernelcrew.kernels.flags import allowed_flags

try:  # the reorganized package may export it at its top level
    from kernelcrew.agents.transforms import not_applicable as _not_applicable  # type: ignore
except ImportError:
    from kernelcrew.agents.transforms.catalogue import not_applicable as _not_applicable

# moves that are settings, not rewrites: they always "apply" when they change something
SETTINGS = ("flags", "knobs", "sequence")
# the chain composer: the model names moves one by one instead
HIDDEN = ("sequence",)
MAX_MOVES = 4  # moves in one answer


@dataclass(frozen=True)
class MoveDoc:
    name: str
    kind: str
    doc: str
    params: dict[str, Any]  # parameter -> default
    applies: bool
    why_not: str = ""  # when it does not apply to the kernel as it is

    def line(self) -> str:
        ps = ", ".join(f"{k}={_show(v)}" for k, v in self.params.items())
        return f"{self.name}({ps}): {self.doc}" if ps else f"{self.name}: {self.doc}"


def _show(v: Any) -> str:
    if isinstance(v, tuple):
        v = list(v)
    return repr(v) if isinstance(v, str) else str(v)


_WHY: OrderedDict[str, dict[str, str]] = OrderedDict()  # text digest -> not_applicable()


def not_applicable(kernel_text: str) -> dict[str, str]:
    """Move -> why it does not apply to this kernel file (cached per text)."""
    key = hashlib.sha1(kernel_text.encode()).hexdigest()
    if key not in _WHY:
        _WHY[key] = dict(_not_applicable(kernel_text))
        while len(_WHY) > 32:
            _WHY.popitem(last=False)
    _WHY.move_to_end(key)
    return _WHY[key]


def catalogue(kernel_text: str, backend: str) -> list[MoveDoc]:
    """Every move for `backend`: applicable ones first (in registry order), then the
    others with the reason they do not apply to this kernel."""
    why = not_applicable(kernel_text)
    docs = []
    for name in transform_names(backend):
        if name in HIDDEN:
            continue
        t = TRANSFORMS[name]
        reason = why.get(name, "")
        docs.append(MoveDoc(name, t.kind, " ".join(t.doc.split()), dict(t.params),
                            applies=not reason, why_not=reason))
    return sorted(docs, key=lambda d: not d.applies)


def normalize(name: str) -> str:
    return re.sub(r"[\s\-]+", "_", str(name).strip().strip("`'\"").lower())


def check_params(name: str, params: dict[str, Any] | None) -> tuple[dict[str, Any], str]:
    """The parameters coerced to the types of the move's defaults, or an error naming
    the parameter and what the move takes."""
    t = TRANSFORMS[name]
    out: dict[str, Any] = {}
    for key, value in (params or {}).items():
        if key not in t.params:
            known = ", ".join(f"{k} (default {_show(v)})" for k, v in t.params.items())
            return {}, (f"move {name} has no parameter {key!r}; "
                        + (f"its parameters: {known}" if known else "it takes none"))
        default = t.params[key]
        try:
            out[key] = _coerce(value, default)
        except (TypeError, ValueError):
            return {}, (f"move {name}: parameter {key}={value!r} is not a "
                        f"{type(default).__name__} like its default {_show(default)}")
    return out, ""


def _coerce(value: Any, default: Any) -> Any:
    if default is None:
        return value
    if isinstance(default, bool):
        if isinstance(value, str):
            if value.lower() not in ("true", "false", "1", "0", "yes", "no"):
                raise ValueError(value)
            return value.lower() in ("true", "1", "yes")
        return bool(value)
    if isinstance(default, int):
        f = float(value)
        if f != int(f):
            raise ValueError(value)
        return int(f)
    if isinstance(default, float):
        return float(value)
    if isinstance(default, str):
        if not isinstance(value, str | int | float):
            raise TypeError(value)
        return str(value)
    if isinstance(default, tuple | list):
        if isinstance(value, str):
            value = value.split()
        if not isinstance(value, list | tuple):
            raise TypeError(value)
        return [str(v) for v in value]
    if isinstance(default, dict):
        if not isinstance(value, dict):
            raise TypeError(value)
        return dict(value)
    return value


@dataclass
class Applied:
    """The result of naming moves: the new kernel, or why not."""

    kernel: str | None
    steps: list[tuple[str, dict[str, Any]]] = field(default_factory=list)  # as applied
    refused: str = ""  # why the first move that failed does not apply

    @property
    def transform(self) -> str | None:
        return self.steps[0][0] if self.steps else None

    @property
    def params(self) -> dict[str, Any]:
        """The first move's parameters, the rest as its `then` chain (apply_transform)."""
        if not self.steps:
            return {}
        first = dict(self.steps[0][1])
        if len(self.steps) > 1:
            first["then"] = [[n, dict(p)] for n, p in self.steps[1:]]
        return first

    @property
    def kind(self) -> str:
        return "+".join(dict.fromkeys(move_kind(n, p) for n, p in self.steps))


def move_kind(name: str, params: dict[str, Any]) -> str:
    """The Change.kind of a move (a single knob is `knob:NAME`)."""
    if name == "knobs":
        keys = sorted((params.get("values") or {}).keys())
        return f"knob:{keys[0]}" if len(keys) == 1 else "knobs"
    return TRANSFORMS[name].kind


def _refusal(name: str, text: str, params: dict[str, Any], backend: str) -> str:
    if name == "flags":
        named = [*(params.get("add") or ()), *(params.get("set") or ())]
        allowed = set(allowed_flags(backend))
        bad = [f for f in named if f not in allowed and not f.startswith(("-D", "-maxrreg"))]
        if bad:
            return (f"flags {' '.join(bad)} are not on the allow-list; allowed: "
                    f"{' '.join(sorted(allowed))}")
        return "the flag list would not change (or would not be valid)"
    if name == "knobs":
        return "the knob values would not change the kernel file"
    why = not_applicable(text).get(name)
    return why or "it does not apply to the kernel as it is now"


def apply_moves(kernel_text: str, calls: list[tuple[str, dict[str, Any]]], backend: str
                ) -> Applied:
    """Apply the named moves in order to `kernel_text`; each must apply. The refusal
    names the move and the catalogue's reason (the legality check that failed, the loop
    form that is missing)."""
    if len(calls) > MAX_MOVES:
        return Applied(None, refused=f"at most {MAX_MOVES} moves in one answer")
    names = transform_names(backend)
    text, steps = kernel_text, []
    for raw_name, raw_params in calls:
        name = normalize(raw_name)
        if name not in TRANSFORMS or name in HIDDEN:
            near = [n for n in names if n not in HIDDEN]
            return Applied(None, steps, f"there is no move named {raw_name!r}; the moves for "
                                        f"{backend}: {', '.join(near)}")
        if name not in names:
            return Applied(None, steps, f"move {name} is for "
                                        f"{', '.join(TRANSFORMS[name].backends)} only")
        params, error = check_params(name, raw_params)
        if error:
            return Applied(None, steps, error)
        new = apply_transform(name, text, params)
        if new is None:
            return Applied(None, steps, f"move {name} does not apply: "
                                        f"{_refusal(name, text, params, backend)}")
        text = new
        steps.append((name, params))
    return Applied(text if steps else None, steps, "" if steps else "no move was named")
