"""Prompt files under `kernelcrew/agents/prompts/`: one per role, plus the shared rules and
the step instructions. `$name` placeholders are filled with `string.Template`; a missing
value is an error, so a renamed placeholder cannot silently reach a model.

`KERNELCREW_PROMPTS_DIR` points at another folder of prompt files (a copy to edit); a file
missing there is read from the package."""

from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path
from string import Template

PROMPTS_DIR = Path(__file__).resolve().parent.parent / "prompts"


def prompts_dir(name: str) -> Path:
    own = os.environ.get("KERNELCREW_PROMPTS_DIR")
    if own and (Path(own) / name).is_file():
        return Path(own)
    return PROMPTS_DIR


def _load(name: str) -> Template:
    return _load_from(str(prompts_dir(name)), name)


@lru_cache(maxsize=128)
def _load_from(folder: str, name: str) -> Template:
    path = Path(folder) / name
    if not path.is_file():
        raise FileNotFoundError(f"no prompt file {path}; expected one per role under "
                                f"{PROMPTS_DIR}")
    return Template(path.read_text())


def render(name: str, **values: object) -> str:
    """The prompt file `name` with its `$placeholders` filled."""
    return _load(name).substitute({k: str(v) for k, v in values.items()}).strip()


def has_prompt(name: str) -> bool:
    return (prompts_dir(name) / name).is_file()
