"""The writer: an LLM that writes an operator's first kernel from its reference alone.

An operator folder with `reference.py` and no baseline gets its baseline from the writer
(`--agents llm`): a plan, then the kernel file, then repairs. The writer never compiles
or runs anything itself: the graph's baseline node compiles each kernel, verifies it on
every shape group and hands the compiler's errors or the wrong results back through
`fix`, at most `MAX_ATTEMPTS` kernels in all. Every call is one visible `model.invoke`
through `LLMClient.ask`, with the prompts in `agents/prompts/` (writer.md,
step_write_plan.md, step_write_code.md, step_write_fix.md).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage
from pydantic import BaseModel

from kernelcrew.agents.llm.answers import complete_front_matter, read_text_answer
from kernelcrew.agents.llm.client import LLMClient, new_usage
from kernelcrew.agents.llm.prompts import render
from kernelcrew.agents.llm.schemas import KernelAnswer, PlanAnswer
from kernelcrew.agents.llm.settings import LLMSettings
from kernelcrew.agents.llm.specialists import _check_plan, clean_kernel
from kernelcrew.errors import InputError
from kernelcrew.kernels.kernelfile import parse_kernel_text

MAX_ATTEMPTS = 4  # kernels written in all: the first and three repairs
FEEDBACK_CHARS = 3000


@dataclass
class WriterTask:
    """What the writer sees: the operator's contract (arrays, dtypes, shape groups as
    ranges, tolerance; never the benchmark's cases) and the reference as the user wrote
    it."""

    op: str
    backend: str
    entry: str
    signature: str  # the entry's C parameter list, in order
    tolerance: str
    contract: str  # agents.contract.OperatorContract.lines(), one per line
    reference: str
    inputs: str = ""  # inputs.py, when the op has one
    description: str = ""


def check_first_kernel(text: str, task: WriterTask) -> str | None:
    """Why a kernel written by the model cannot be tried as it is, or None."""
    backend = "cuda" if task.backend == "cuda" else "cpu"
    try:
        kf = parse_kernel_text(text, backend)
    except InputError as e:
        return f"the kernel file is not usable: {e}"
    if backend == "cpu":
        if kf.meta.entry != task.entry:
            return f"the front matter's entry must be `{task.entry}` (it says `{kf.meta.entry}`)"
        if not re.search(rf"\b{re.escape(task.entry)}\s*\(", kf.body):
            return f"the source does not define the entry function `{task.entry}`"
    if kf.body.count("{") != kf.body.count("}"):
        return "the kernel file looks incomplete (unbalanced braces): send the whole file"
    return None


class LLMWriter:
    name = "writer"

    def __init__(self, settings: dict[str, Any] | LLMSettings | None = None, *,
                 run_dir: str | None = None) -> None:
        self.settings = settings if isinstance(settings, LLMSettings) else \
            LLMSettings.resolve(settings)
        self.client = LLMClient(self.settings, agent=self.name, run_dir=run_dir)
        self.last_usage: dict[str, int] = new_usage()
        self.last_prompt_file: str | None = None

    def _system(self, task: WriterTask) -> str:
        from kernelcrew.kernels.policy import CPU_INCLUDES, CUDA_INCLUDES

        cuda = task.backend == "cuda"
        launch_rule = ("Every `__global__` function must be in the front matter's `launch:` "
                       "plan." if cuda else
                       f"On the CPU export exactly one `extern \"C\"` function, the entry "
                       f"`{task.entry}`; helpers must be `static` or `inline`.")
        rules = render("rules.md", signature=task.signature, tolerance=task.tolerance,
                       launch_rule=launch_rule,
                       headers=", ".join(sorted(CUDA_INCLUDES if cuda else CPU_INCLUDES)),
                       format=render("format_cuda.md" if cuda else "format_cpu.md"))
        return f"{render('writer.md')}\n\n{rules}"

    def _context(self, task: WriterTask) -> str:
        parts = [f"Operator {task.op} on {task.backend}"
                 + (f": {task.description}" if task.description else "") + ".",
                 "The operator's contract:", task.contract.strip(),
                 "reference.py (the semantics to match, float64):",
                 "```python", task.reference.strip(), "```"]
        if task.inputs:
            parts += ["inputs.py (how inputs are made):", "```python", task.inputs.strip(),
                      "```"]
        parts.append(f"Entry: `{task.entry}({task.signature})`; tolerance {task.tolerance}.")
        return "\n".join(parts)

    def _messages(self, task: WriterTask, step: str) -> list[BaseMessage]:
        return [SystemMessage(self._system(task)),
                HumanMessage(f"{self._context(task)}\n\n{step}")]

    def _done(self) -> None:
        self.last_usage = self.client.spent()  # with its cost: the writer is in the budget
        self.last_prompt_file = self.client.files[-1] if self.client.files else None

    def plan(self, task: WriterTask) -> PlanAnswer | None:
        self.client.reset()
        try:
            ans = self.client.ask(self._messages(task, render("step_write_plan.md")),
                                  PlanAnswer, step="plan", validate=_check_plan)
            return ans if isinstance(ans, PlanAnswer) else None
        finally:
            self._done()

    def _kernel(self, task: WriterTask, step_text: str, step: str) -> str | None:
        template = (f"/* kernelcrew\nentry: {task.entry}\nflags: [-O2]\n*/\n"
                    if task.backend != "cuda" else "")

        def usable(ans: BaseModel) -> str | None:
            assert isinstance(ans, KernelAnswer)
            ans.kernel = clean_kernel(ans.kernel)
            if template:  # the entry and flags are known: a bare source is completed
                ans.kernel = complete_front_matter(ans.kernel, template, task.backend)
            return check_first_kernel(ans.kernel, task)

        def from_text(text: str) -> dict | None:
            got = read_text_answer(text)
            return {"kernel": got["kernel"]} if got and got.get("kernel") else None

        self.client.reset()
        try:
            ans = self.client.ask(self._messages(task, step_text), KernelAnswer, step=step,
                                  validate=usable, text_parser=from_text,
                                  text_form="form_kernel.md")
            return ans.kernel if isinstance(ans, KernelAnswer) else None
        finally:
            self._done()

    def code(self, task: WriterTask, plan: PlanAnswer) -> str | None:
        return self._kernel(task, render("step_write_code.md", plan=_plan_text(plan),
                                         entry=task.entry, signature=task.signature), "code")

    def fix(self, task: WriterTask, plan: PlanAnswer, kernel: str, feedback: str,
            attempt: int) -> str | None:
        return self._kernel(task, render("step_write_fix.md", attempt=attempt,
                                         max_attempts=MAX_ATTEMPTS,
                                         feedback=feedback[:FEEDBACK_CHARS], kernel=kernel,
                                         plan=_plan_text(plan)), "fix")

    @property
    def last_error(self) -> str | None:
        return self.client.last_error


def _plan_text(p: PlanAnswer) -> str:
    return f"Plan ({p.kind}):\n{p.plan}\nRisks: {p.risks}"
