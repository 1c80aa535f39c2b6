"""An LLM reflector (`--agents reflector=llm`): why a candidate helped or not, explained
from the measured numbers, and that explanation is what memory stores.

The answer must cite at least one of the numbers it was given (the speedups, the noise
band, the error of a wrong result): an explanation that quotes none is sent back once, and
when it still quotes none the heuristic reflection is kept, marked as such.
"""

from __future__ import annotations

import re
from typing import Any

from langchain_core.messages import HumanMessage, SystemMessage
from pydantic import BaseModel, Field

from kernelcrew.agents.llm.client import LLMClient, PromptTooLarge, new_usage
from kernelcrew.agents.llm.prompts import render
from kernelcrew.agents.llm.settings import LLMSettings

_NUM = re.compile(r"(?<![\w.])[-+]?(?:\d+\.\d+|\d+)(?:[eE][-+]?\d+)?")


class ReflectionAnswer(BaseModel):
    """Why the change helped or not, from the measurements."""

    why: str = Field(description="two to four sentences citing the measured numbers")
    lesson: str = Field(description="one sentence a future run can act on")


def numbers(text: str) -> list[float]:
    out = []
    for m in _NUM.findall(text):
        try:
            out.append(float(m))
        except ValueError:
            continue
    return out


def cites(text: str, measured: list[float]) -> bool:
    """Whether `text` quotes one of the measured numbers (to the digits it shows)."""
    for a in numbers(text):
        for m in measured:
            if m in (0.0, 1.0) and a == m:
                continue  # 1.0x / 0 are too common to count as a citation
            if abs(a - m) <= max(0.006, 0.006 * abs(m)):
                return True
    return False


class LLMReflector:
    name = "reflector"

    def __init__(self, settings: dict[str, Any] | LLMSettings | None = None, *,
                 run_dir: str | None = None) -> None:
        self.settings = settings if isinstance(settings, LLMSettings) else \
            LLMSettings.resolve(settings)
        self.client = LLMClient(self.settings, agent=self.name, run_dir=run_dir)
        self.last_usage: dict[str, int] = new_usage()
        self.last_answers: list[dict[str, Any]] = []
        self.last_prompt_file: str | None = None
        self.last_error: str | None = None

    def explain(self, *, facts: list[str], measured: list[float], iteration: int = 0
                ) -> str | None:
        """The model's explanation (why + lesson), or None when it is unusable."""
        self.client.reset()

        def usable(ans: BaseModel) -> str | None:
            assert isinstance(ans, ReflectionAnswer)
            if not ans.why.strip():
                return "the explanation must not be empty"
            if measured and not cites(ans.why + " " + ans.lesson, measured):
                shown = ", ".join(f"{m:.3g}" for m in measured[:6])
                return ("the explanation cites none of the measured numbers; quote them as "
                        f"given (e.g. {shown})")
            return None

        try:
            ans = self.client.ask(
                [SystemMessage(render("reflector.md")),
                 HumanMessage(render("step_reflect.md", facts="\n".join(facts)))],
                ReflectionAnswer, step="reflect", iteration=iteration, validate=usable)
        except PromptTooLarge as e:
            ans, self.client.last_error = None, str(e)
        finally:
            self.last_usage = self.client.spent()
            self.last_answers = list(self.client.answers)
            self.last_prompt_file = self.client.files[-1] if self.client.files else None
        self.last_error = self.client.last_error
        if not isinstance(ans, ReflectionAnswer):
            return None
        return f"{ans.why.strip()} Lesson: {ans.lesson.strip()}"
