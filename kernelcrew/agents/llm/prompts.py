"""Prompt files under `kernelcrew/agents/prompts/`: one per role, plus the shared rules and
the step instructions. `$name` placeholders are filled with `string.Template`; a missing
value is an error, so a renamed placeholder cannot silently reach a model."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from string import Template

PROMPTS_DIR = Path(__file__).resolve().parent.parent / "prompts"


@lru_cache(maxsize=64)
def _load(name: str) -> Template:
    path = PROMPTS_DIR / name
    if not path.is_file():
        raise FileNotFoundError(f"no prompt file {path}; expected one per role under "
                                f"{PROMPTS_DIR}")
    return Template(path.read_text())


def render(name: str, **values: object) -> str:
    """The prompt file `name` with its `$placeholders` filled."""
    return _load(name).substitute({k: str(v) for k, v in values.items()}).strip()


def has_prompt(name: str) -> bool:
    return (PROMPTS_DIR / name).is_file()
