"""The specialist protocol and the registry the crew's fan-out reads.

A specialist looks at one field (memory access, loops, compiler flags, or a user's own)
and turns an `AgentContext` into 0-3 typed proposals. Specialists are registered per
policy ("heuristic", "llm", ...):

- built-in policies are packages named in `POLICY_MODULES`, imported lazily the first
  time the policy is used; each exposes `SPECIALISTS: dict[name, factory]`;
- `register_specialist(name, factory_or_instance, policy=...)` adds one at run time (a
  factory may also be an import path "package.module:attr"); policy "any" serves every
  policy;
- installed packages add theirs through the entry-point group `kernelcrew.specialists`
  (`name = "package.module:Factory"`; a name "llm:reviewer" registers under policy llm,
  a plain name under "any"). Entry points are listed from metadata and imported only
  when that specialist is used.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import threading
from collections.abc import Callable
from typing import Protocol, runtime_checkable

from kernelcrew.agents.context import AgentContext
from kernelcrew.agents.proposal import Proposal

ENTRY_POINT_GROUP = "kernelcrew.specialists"
ANY = "any"

# policy -> module whose SPECIALISTS maps names to factories; imported on first use
POLICY_MODULES: dict[str, str] = {
    "heuristic": "kernelcrew.agents.heuristic",
    "llm": "kernelcrew.agents.llm.specialists",
}
# what to install when a policy's module cannot be imported
POLICY_EXTRAS: dict[str, str] = {"llm": "pip install 'kernelcrew' (langchain-openai)"}


@runtime_checkable
class Specialist(Protocol):
    """One field of expertise. `propose` returns 0-3 proposals, best first; `revise` gets
    the failed proposal back with `ctx.feedback` (normalized compile error or failure) and
    returns a corrected proposal, or None to give up."""

    name: str  # "memory_access", "loop", "compiler_flags", or a user's
    field: str  # one line: what it looks at

    def propose(self, ctx: AgentContext) -> list[Proposal]: ...

    def revise(self, ctx: AgentContext, failed: Proposal) -> Proposal | None: ...


Factory = Callable[[], Specialist]
Entry = Specialist | Factory | str  # an instance, a factory (class), or "module:attr"

_lock = threading.RLock()
_registry: dict[str, dict[str, Entry]] = {}  # policy -> name -> entry
_instances: dict[tuple[str, str], Specialist] = {}
_loaded_policies: set[str] = set()
_entry_points_read = False


class SpecialistNotFound(KeyError):
    def __str__(self) -> str:  # KeyError quotes its message; keep it readable
        return str(self.args[0])


def register_specialist(name: str, factory_or_instance: Entry, policy: str = "heuristic",
                        *, replace: bool = True) -> None:
    """Register a specialist under a policy ("any": every policy). A factory is called
    once, on first use; an instance is used as it is."""
    if not name or not name.replace("_", "").replace("-", "").isalnum():
        raise ValueError(f"specialist name {name!r}: use letters, digits, _ or -")
    with _lock:
        slot = _registry.setdefault(policy, {})
        if name in slot and not replace:
            raise ValueError(f"specialist {name!r} is already registered for policy {policy!r}")
        slot[name] = factory_or_instance
        for key in [k for k in _instances if k[1] == name and (k[0] == policy or policy == ANY)]:
            del _instances[key]


def unregister_specialist(name: str, policy: str = "heuristic") -> None:
    with _lock:
        _registry.get(policy, {}).pop(name, None)
        for key in [k for k in _instances if k[1] == name]:
            del _instances[key]


def _load_policy(policy: str) -> None:
    if policy in _loaded_policies or policy == ANY:
        return
    _loaded_policies.add(policy)
    module = POLICY_MODULES.get(policy)
    if module is None:
        return
    try:
        mod = importlib.import_module(module)
    except ModuleNotFoundError as e:
        if e.name and module.startswith(e.name):
            return  # the policy ships no specialists (yet): only registered ones exist
        hint = POLICY_EXTRAS.get(policy, "")
        raise ImportError(f"the {policy!r} specialists need {e.name!r}"
                          + (f"; install it: {hint}" if hint else "")) from e
    for name, factory in getattr(mod, "SPECIALISTS", {}).items():
        _registry.setdefault(policy, {}).setdefault(name, factory)


def _read_entry_points() -> None:
    global _entry_points_read
    if _entry_points_read:
        return
    _entry_points_read = True
    for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
        policy, _, name = ep.name.rpartition(":")
        _registry.setdefault(policy or ANY, {}).setdefault(name, ep.value)


def _ensure(policy: str) -> None:
    with _lock:
        _load_policy(policy)
        _read_entry_points()


def specialist_names(policy: str = "heuristic") -> list[str]:
    """Names of the specialists a policy offers: its own, then those for every policy."""
    _ensure(policy)
    with _lock:
        own = list(_registry.get(policy, {}))
        shared = [n for n in _registry.get(ANY, {}) if n not in own]
    return own + shared


def _resolve(entry: Entry, name: str) -> Specialist:
    obj: object = entry
    if isinstance(entry, str):
        module, _, attr = entry.partition(":")
        try:
            obj = importlib.import_module(module)
            for part in attr.split(".") if attr else []:
                obj = getattr(obj, part)
        except (ImportError, AttributeError) as e:
            raise ImportError(f"specialist {name!r}: cannot load {entry!r}: {e}") from e
    if isinstance(obj, type) or (callable(obj) and not hasattr(obj, "propose")):
        obj = obj()  # a class or factory
    if not (hasattr(obj, "propose") and hasattr(obj, "revise")):
        raise TypeError(f"specialist {name!r} ({entry!r}) has no propose()/revise(); see "
                        "kernelcrew.agents.specialist.Specialist")
    if not getattr(obj, "name", None):
        try:
            obj.name = name  # type: ignore[attr-defined]
        except AttributeError:
            pass
    return obj  # type: ignore[return-value]


def get_specialist(name: str, policy: str = "heuristic") -> Specialist:
    """The specialist registered as `name` for `policy` (or for every policy)."""
    _ensure(policy)
    with _lock:
        key = (policy, name)
        if key in _instances:
            return _instances[key]
        entry = _registry.get(policy, {}).get(name)
        if entry is None:
            entry = _registry.get(ANY, {}).get(name)
        if entry is None:
            known = ", ".join(specialist_names(policy)) or "none"
            raise SpecialistNotFound(f"no specialist {name!r} for policy {policy!r}; known: "
                                     f"{known} (register one with register_specialist)")
        inst = _resolve(entry, name)
        _instances[key] = inst
        return inst
