"""An LLM critic (`--agents critic=llm`): after a race, why the candidate won or lost,
in a few sentences that cite the measured numbers it was given (per-group times and
speedups, the profile's metrics against the best's). An answer that cites none is sent
back once; when it still cites none, the heuristic critique stands.
"""

from __future__ import annotations

from typing import Any

from langchain_core.messages import HumanMessage, SystemMessage
from pydantic import BaseModel, Field

from kernelcrew.agents.llm.client import LLMClient, PromptTooLarge, new_usage
from kernelcrew.agents.llm.prompts import render
from kernelcrew.agents.llm.reflector import cites
from kernelcrew.agents.llm.settings import LLMSettings


class CritiqueAnswer(BaseModel):
    """Why the candidate won or lost its race, from the measurements."""

    why: str = Field(description="two to four sentences citing the measured numbers")


class LLMCritic:
    name = "critic"

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
        """The model's critique, or None when it is unusable."""
        self.client.reset()

        def usable(ans: BaseModel) -> str | None:
            assert isinstance(ans, CritiqueAnswer)
            if not ans.why.strip():
                return "the critique must not be empty"
            if measured and not cites(ans.why, measured):
                shown = ", ".join(f"{m:.3g}" for m in measured[:6])
                return ("the critique cites none of the measured numbers; quote them as "
                        f"given (e.g. {shown})")
            return None

        try:
            ans = self.client.ask(
                [SystemMessage(render("critic.md")),
                 HumanMessage(render("step_critique.md", facts="\n".join(facts)))],
                CritiqueAnswer, step="critique", iteration=iteration, validate=usable)
        except PromptTooLarge as e:
            ans, self.client.last_error = None, str(e)
        finally:
            self.last_usage = self.client.spent()
            self.last_answers = list(self.client.answers)
            self.last_prompt_file = self.client.files[-1] if self.client.files else None
        self.last_error = self.client.last_error
        return ans.why.strip() if isinstance(ans, CritiqueAnswer) else None
