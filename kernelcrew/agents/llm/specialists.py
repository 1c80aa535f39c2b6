"""LLM specialists: read the contract, the code, the profile and the catalogue; plan; then
make the change by naming moves of the catalogue, by edits, or by writing the kernel.

Each propose/revise is one or two visible `model.invoke` calls (through `LLMClient.ask`):
1. plan: the bottleneck (at most three sentences), the plan, the kind of change, expected
   gain, risks, confidence; recorded before any code is written;
2. code: the change. Moves of the catalogue named with parameters are applied and
   legality-checked by the catalogue itself (`moves`); a move that does not apply comes
   back with the catalogue's reason. Search/replace edits follow the moves. A kernel file
   (in JSON, or as a fenced code block) is the free-form path; the crew fills in the front
   matter it knows. A proposal made of moves only carries `transform`/`params`, so the
   coordinator merges and replays it like a heuristic one.
With `one_call` (a setting, for small or slow models) plan and change are one answer.
A compile error goes back with the normalized errors (same plan, fix the code); when the
graph says so (`Feedback.replan`, after repeated compile errors of one candidate) the
agent revises its plan first. A wrong result is explained before it is fixed.

After each call the graph reads `last_usage` (input/output/total tokens, calls),
`last_prompt_file` (the record of the last call under `<run_dir>/llm/`), `last_prompt_files`,
`last_context` (the context budget report), `last_plan` and `last_answers`.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import partial
from typing import Any

from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage
from pydantic import BaseModel

from kernelcrew.agents.context import AgentContext
from kernelcrew.agents.llm.answers import apply_edits, complete_front_matter, read_text_answer
from kernelcrew.agents.llm.client import LLMClient, PromptTooLarge, new_usage
from kernelcrew.agents.llm.focus import FocusedContext, build_context
from kernelcrew.agents.llm.moves import SETTINGS, Applied, apply_moves
from kernelcrew.agents.llm.prompts import has_prompt, render
from kernelcrew.agents.llm.schemas import (
    CodeAnswer,
    ExplainAnswer,
    KernelAnswer,
    PlanAnswer,
    ProposeAnswer,
)
from kernelcrew.agents.llm.settings import LLMSettings
from kernelcrew.agents.proposal import Change, Proposal
from kernelcrew.agents.transforms import changed_regions
from kernelcrew.errors import InputError
from kernelcrew.kernels.kernelfile import KernelFile, parse_kernel_text
from kernelcrew.kernels.policy import CPU_INCLUDES, CUDA_INCLUDES
from kernelcrew.kernels.signature import check_entry, declaration

__all__ = ["FIELDS", "SPECIALISTS", "CodeAnswer", "KernelAnswer", "LLMSpecialist",
           "PlanAnswer", "check_kernel", "clean_kernel", "kernel_verdict", "make_specialist"]

FIELDS: dict[str, str] = {  # specialist name -> field (its prompt file is <field>.md)
    "memory_access": "memory_access",
    "loop": "loop",
    "compiler_flags": "compiler_flags",
}
FIELD_WORDS = {"memory_access": "memory traffic and access patterns (LLM)",
               "loop": "loops, parallelism and occupancy (LLM)",
               "compiler_flags": "compiler flags, knobs and vectorization (LLM)"}
MAX_COMPILE_TRIES = 3
MIN_CONTEXT_TOKENS = 150
MAX_GAIN = 10.0
REPLAN_MARK = "revise your plan"


def _check_explain(a: BaseModel) -> str | None:
    assert isinstance(a, ExplainAnswer)
    if not a.cause.strip() or not a.fix.strip():
        return "the cause and the fix must not be empty"
    return None


_FENCE = re.compile(r"\A\s*```[\w+-]*[ \t]*\n(?P<body>.*?)\n?```\s*\Z", re.DOTALL)
_LAUNCH_BOUNDS = re.compile(r"__launch_bounds__\s*\([^)]*\)")
_GLOBAL_FN = re.compile(r"__global__\s+(?:static\s+|inline\s+)*void\s+(\w+)\s*\(")


def clean_kernel(text: str) -> str:
    """The kernel text without a Markdown fence around it, ending in one newline."""
    m = _FENCE.match(text)
    if m:
        text = m.group("body")
    return text.strip("\n") + "\n"


def _parse(text: str, backend: str) -> KernelFile | None:
    try:
        return parse_kernel_text(text, "cuda" if backend == "cuda" else "cpu")
    except InputError:
        return None


def check_kernel(text: str, ctx: AgentContext) -> str | None:
    """Why a kernel file written by the model cannot be used as it is, or None."""
    verdict = kernel_verdict(text, ctx)
    return verdict[1] if verdict else None


def kernel_verdict(text: str, ctx: AgentContext) -> tuple[str, str] | None:
    """(kind, why) when a kernel file written by the model cannot be used, else None; kind
    is wrong_signature (another entry name or parameter list) or invalid."""
    backend = "cuda" if ctx.backend == "cuda" else "cpu"
    try:
        kf = parse_kernel_text(text, backend)
    except InputError as e:
        return "invalid", f"the kernel file is not usable: {e}"
    body = kf.body
    if body.count("{") != body.count("}") or body.count("(") != body.count(")"):
        return "invalid", ("the kernel file looks incomplete (unbalanced braces or "
                           "parentheses): send the whole file")
    why = _cpu_verdict(kf, ctx) if backend == "cpu" else _cuda_verdict(kf)
    if why:
        return why
    if text.strip() == ctx.kernel.strip():
        return "invalid", "the kernel is identical to the current best: carry out the plan's change"
    return None


def _cpu_verdict(kf: KernelFile, ctx: AgentContext) -> tuple[str, str] | None:
    base = _parse(ctx.kernel, "cpu")
    entry = kf.meta.entry or ""
    if base is not None and base.meta.entry and entry != base.meta.entry:
        return "wrong_signature", (f"the entry must stay `{base.meta.entry}` (the front "
                                   f"matter says `{entry}`): the operator's interface "
                                   "cannot change")
    if ctx.entry_params:
        why = check_entry(kf.body, entry, ctx.entry_params)
        if why:
            return "wrong_signature", why
    elif not re.search(rf"\b{re.escape(entry)}\s*\(", kf.body):
        return "wrong_signature", f"the source does not define the entry function `{entry}`"
    return None


def _cuda_verdict(kf: KernelFile) -> tuple[str, str] | None:
    declared = {ln.kernel for ln in kf.meta.launch}
    defined = set(_GLOBAL_FN.findall(_LAUNCH_BOUNDS.sub("", kf.body)))
    extra = sorted(defined - declared)
    if extra:
        return "invalid", (f"kernel(s) {', '.join(extra)} are defined but not in the launch "
                           "plan; every __global__ function must be launched by the front matter")
    missing = sorted(declared - defined)
    if missing:
        return "wrong_signature", (f"the launch plan names kernel(s) {', '.join(missing)} that "
                                   "the source does not define")
    return None


def _check_plan(p: BaseModel) -> str | None:
    assert isinstance(p, PlanAnswer)
    if not p.plan.strip() or not p.bottleneck.strip():
        return "the bottleneck and the plan must not be empty"
    return None


def _kind(text: str, fallback: str) -> str:
    k = re.sub(r"[^a-z0-9_:+\-]+", "_", text.strip().lower()).strip("_")
    return k[:40] or fallback


def _clamp(v: float, lo: float, hi: float) -> float:
    try:
        return min(hi, max(lo, float(v)))
    except (TypeError, ValueError):
        return lo


def _offer(ctx: AgentContext) -> str:
    return ", ".join(offered_moves(ctx)) or "none (write the change yourself)"


def offered_moves(ctx: AgentContext) -> list[str]:
    """The moves a bare answer may name: those that apply and were not tried on this
    kernel already, settings left out."""
    return [m.name for m in ctx.moves if m.applies and not m.tried and m.name not in SETTINGS]


class Realized:
    """What a code answer makes of the current best: the kernel and how it was made."""

    def __init__(self, kernel: str, applied: Applied | None, form: str) -> None:
        self.kernel, self.applied, self.form = kernel, applied, form

    @property
    def replayable(self) -> bool:
        """Moves only: the catalogue can apply it again to another base."""
        return self.applied is not None and self.form == "moves"


def realize(ans: CodeAnswer, ctx: AgentContext, edit_base: str | None = None
            ) -> Realized | tuple[str, str]:
    """The candidate an answer describes, or (kind, why) when it cannot be made: moves
    first (each must apply to the current best), then edits (of the current best, or of
    `edit_base`, the failed candidate being fixed, when there are no moves), else the
    kernel file with its front matter completed."""
    text, applied = (edit_base or ctx.kernel) if not ans.moves else ctx.kernel, None
    if ans.moves:
        applied = apply_moves(ctx.kernel, [(m.move, m.params) for m in ans.moves], ctx.backend)
        if applied.kernel is None:
            offer = ", ".join(offered_moves(ctx)) or "none"
            return "move_refused", f"{applied.refused}. Moves that apply now: {offer}"
        text = applied.kernel
    if ans.edits:
        edited, why = apply_edits(text, [e.model_dump() for e in ans.edits])
        if edited is None:
            return "invalid", why
        text = edited
    if not ans.moves and not ans.edits:
        if not ans.kernel.strip():
            return "invalid", ("the answer names no move, no edit and no kernel: give one "
                               "of them")
        text = complete_front_matter(clean_kernel(ans.kernel), ctx.kernel, ctx.backend)
    verdict = kernel_verdict(text, ctx)
    if verdict:
        return verdict
    return Realized(text, applied, ans.form())


class LLMSpecialist:
    """A specialist whose proposals are written by an LLM (policy "llm")."""

    def __init__(self, name: str, focus: str | None = None, *,
                 settings: dict[str, Any] | LLMSettings | None = None,
                 run_dir: str | None = None) -> None:
        self.name = name
        self.focus = focus or FIELDS.get(name, name)  # prompt file and context focus
        self.field = FIELD_WORDS.get(self.focus, self.focus)  # the protocol's one line
        self._settings_in = settings
        self._settings: LLMSettings | None = settings if isinstance(settings, LLMSettings) \
            else None
        self.run_dir = run_dir
        self._client: LLMClient | None = None
        self._planned: tuple[int, PlanAnswer] | None = None
        self.last_usage: dict[str, int] = new_usage()
        self.last_prompt_file: str | None = None
        self.last_prompt_files: list[str] = []
        self.last_context: dict[str, Any] | None = None
        self.last_plan: dict[str, Any] | None = None
        self.last_error: str | None = None
        self.last_answers: list[dict[str, Any]] = []
        self.last_explanation: dict[str, str] | None = None

    def __repr__(self) -> str:
        return f"LLMSpecialist({self.name!r}, focus={self.focus!r})"

    # -- settings --------------------------------------------------------------------------
    def configure(self, settings: dict[str, Any] | LLMSettings | None = None,
                  run_dir: str | None = None) -> LLMSpecialist:
        """Give the agent the run's LLM settings (`RunContext.llm`) and run directory."""
        if settings is not None and settings != self._settings_in:
            self._settings_in = settings
            self._settings = settings if isinstance(settings, LLMSettings) else None
            self._client = None  # new settings: a new ChatOpenAI on the next call
        if run_dir is not None:
            self.run_dir = run_dir
        return self

    @property
    def settings(self) -> LLMSettings:
        if self._settings is None:
            src = self._settings_in if isinstance(self._settings_in, dict) else None
            self._settings = LLMSettings.resolve(src)
        return self._settings

    def _begin(self, ctx: AgentContext, *, keep: bool = False) -> LLMClient:
        if self._client is None:
            self._client = LLMClient(self.settings, agent=self.name, run_dir=self.run_dir)
        run_dir = ctx.run_dir or self.run_dir
        if keep:
            self._client.run_dir = run_dir or self._client.run_dir
        else:
            self._client.reset(run_dir=run_dir)
            self.last_error = None
        return self._client

    def _end(self, client: LLMClient) -> None:
        self.last_usage = client.spent()
        self.last_prompt_files = list(client.files)
        self.last_prompt_file = client.files[-1] if client.files else None
        self.last_error = client.last_error or self.last_error
        self.last_answers = list(client.answers)

    # -- prompts ---------------------------------------------------------------------------
    def system_prompt(self, ctx: AgentContext) -> str:
        if self.settings.compact:
            return self._compact_prompt(ctx)
        role_file = f"{self.focus}.md"
        role = render(role_file) if has_prompt(role_file) else render(
            "specialist.md", name=self.name, field=self.field)
        cuda = ctx.backend == "cuda"
        entry = _parse(ctx.kernel, ctx.backend)
        entry_name = entry.meta.entry if entry is not None and entry.meta.entry else ctx.op
        launch_rule = (
            "Every `__global__` function you write must be listed in the front matter's "
            "`launch:` plan, and every launch there must be defined in the file."
            if cuda else
            f"On the CPU keep exactly one exported `extern \"C\"` function, the entry "
            f"`{entry_name}`; helpers must be `static` or `inline`."
            + (f" The entry's parameters, in order, are fixed: "
               f"`{declaration(ctx.entry_params, entry_name)}` (names may differ, types and "
               "order may not)." if ctx.entry_params else ""))
        rules = render("rules.md", signature=ctx.signature, tolerance=ctx.tolerance,
                       launch_rule=launch_rule,
                       headers=", ".join(sorted(CUDA_INCLUDES if cuda else CPU_INCLUDES)),
                       format=render("format_cuda.md" if cuda else "format_cpu.md"))
        return f"{role}\n\n{rules}"

    def _compact_prompt(self, ctx: AgentContext) -> str:
        # a few lines for small models: the role, what must not change, the entry
        kf = _parse(ctx.kernel, ctx.backend)
        entry = kf.meta.entry if kf is not None and kf.meta.entry else ctx.op
        rule = ("Keep every __global__ function in the launch plan." if ctx.backend == "cuda"
                else f"Keep the entry `{declaration(ctx.entry_params, entry)}`."
                if ctx.entry_params else f"Keep the entry `{entry}` and its parameters.")
        return render("compact.md", agent=self.name, field=self.field,
                      tolerance=ctx.tolerance, entry_rule=rule)

    def _messages(self, system: str, built: FocusedContext, step: str) -> list[BaseMessage]:
        return [SystemMessage(system), HumanMessage(f"{built.text}\n\n{step}")]

    def _context(self, ctx: AgentContext, failed: Proposal | None = None,
                 budget: int | None = None) -> FocusedContext:
        built = build_context(ctx, self.focus, budget=budget or self.settings.context_budget,
                              failed=failed)
        self.last_context = built.report()
        return built

    def _ask(self, client: LLMClient, system: str, built: FocusedContext, ctx: AgentContext,
             step_text: str, schema: type[BaseModel], step: str, validate: Any,
             failed: Proposal | None = None, text_form: str | None = None
             ) -> tuple[BaseModel | None, FocusedContext]:
        """`client.ask` with a context that fits the model's: when the prompt (counted, or
        refused by the server) is too large, the context is trimmed to fit and the request
        made again; when even the smallest context cannot fit, `PromptTooLarge` (one line,
        both sizes) ends this agent's turn before anything more is sent."""
        offered = offered_moves(ctx)
        parser = (lambda text: read_text_answer(text, offered)) if text_form else None
        for _ in range(6):
            messages = self._messages(system, built, step_text)
            try:
                client.check_fit(messages, schema, step, text_form)
            except PromptTooLarge as e:
                built = self._shrunk(ctx, built, e.overflow, failed, error=e)
                continue
            try:
                return client.ask(messages, schema, step=step, iteration=ctx.iteration,
                                  validate=validate, text_parser=parser,
                                  text_form=text_form), built
            except PromptTooLarge as e:  # the server's 400 said so: it knows better
                built = self._shrunk(ctx, built, e.overflow, failed, error=e)
        raise PromptTooLarge(f"the {self.name} {step} prompt does not fit the model's context "
                             "after trimming its context six times", prompt_tokens=0,
                             context=0, reserve=0)

    def _shrunk(self, ctx: AgentContext, built: FocusedContext, overflow: int,
                failed: Proposal | None, error: PromptTooLarge | None = None
                ) -> FocusedContext:
        budget = max(MIN_CONTEXT_TOKENS, built.tokens - int(overflow * 1.4) - 32)
        smaller = self._context(ctx, failed, budget=budget)
        if smaller.tokens >= built.tokens:
            # what is never trimmed (rules, operator, kernel, feedback) does not fit: stop
            # with the client's line, which names the prompt's size and the context's
            if error is not None:
                raise error
            raise PromptTooLarge(f"the {self.name} prompt does not fit the model's context "
                                 "even with the shortest context", prompt_tokens=0,
                                 context=0, reserve=0)
        return smaller

    # -- the calls -------------------------------------------------------------------------
    def _plan(self, client: LLMClient, system: str, built: FocusedContext, ctx: AgentContext,
              step: str) -> PlanAnswer | None:
        ans, _ = self._ask(client, system, built, ctx, step, PlanAnswer, "plan", _check_plan)
        if isinstance(ans, PlanAnswer):
            self.last_plan = {**ans.model_dump(), "file": client.files[-1] if client.files
                              else None}
            return ans
        return None

    def _code(self, client: LLMClient, system: str, built: FocusedContext, ctx: AgentContext,
              plan: PlanAnswer | None, step: str, schema: type[CodeAnswer] = CodeAnswer,
              step_name: str = "code", edit_base: str | None = None) -> Proposal | None:
        made: dict[str, Realized] = {}

        def usable(ans: BaseModel) -> tuple[str, str] | None:
            assert isinstance(ans, CodeAnswer)
            got = realize(ans, ctx, edit_base)
            if isinstance(got, tuple):
                return got
            made["it"] = got
            client.annotate(form=got.form)  # recorded with the answer
            return None

        form = "form_small.md" if self.settings.compact else \
            "form_propose.md" if schema is ProposeAnswer else "form_code.md"
        ans, _ = self._ask(client, system, built, ctx, step, schema, step_name, usable,
                           text_form=form)
        if not isinstance(ans, CodeAnswer) or "it" not in made:
            return None
        if plan is None:  # one call: the plan is in the same answer
            assert isinstance(ans, ProposeAnswer)
            plan = PlanAnswer(bottleneck=ans.bottleneck or "(not stated)",
                              plan=ans.plan or "(not stated)", kind=ans.kind or self.focus,
                              expected_gain=ans.expected_gain, risks=ans.risks,
                              confidence=ans.confidence)
            self.last_plan = {**plan.model_dump(), "file": client.files[-1]
                              if client.files else None}
        return self._proposal(ctx, plan, ans, made["it"])

    def _proposal(self, ctx: AgentContext, plan: PlanAnswer, ans: CodeAnswer,
                  made: Realized) -> Proposal:
        new = _parse(made.kernel, ctx.backend)
        old = _parse(ctx.kernel, ctx.backend)
        flags = knobs = None
        ctype = "source"
        if new is not None and old is not None:
            if new.meta.flags != old.meta.flags:
                flags = list(new.meta.flags)
            if new.meta.knobs != old.meta.knobs:
                knobs = dict(new.meta.knobs)
            if new.body.strip() == old.body.strip() and new.meta.launch == old.meta.launch \
                    and new.meta.temps == old.meta.temps:
                ctype = "flags" if flags is not None else "knobs"
        regions: list[str] = []
        if ctype == "source":
            regions = changed_regions(ctx.kernel, made.kernel)
        applied = made.applied if made.replayable else None
        kind = applied.kind if applied is not None else _kind(plan.kind, self.focus)
        return Proposal(
            author=self.name, bottleneck=plan.bottleneck, plan=plan.plan,
            change=Change(type=ctype, kind=kind, kernel=made.kernel, flags=flags, knobs=knobs,
                          regions=regions,
                          transform=applied.transform if applied is not None else None,
                          params=applied.params if applied is not None else {}),
            expected_gain=_clamp(ans.expected_gain or plan.expected_gain, 0.0, MAX_GAIN),
            risks=ans.risks or plan.risks,
            confidence=_clamp(ans.confidence, 0.0, 1.0), estimate="model")

    # -- the Specialist protocol -----------------------------------------------------------
    def plan(self, ctx: AgentContext) -> str:
        """Plan only (the crew plans first after repeated compile failures)."""
        client = self._begin(ctx)
        try:
            built = self._context(ctx)
            extra = ("\nThe crew's last candidates failed to compile three times in a row: "
                     "choose a change you can write correctly (a move of the catalogue is "
                     "the surest), and say how it avoids the errors seen.")
            p = self._plan(client, self.system_prompt(ctx), built, ctx,
                           render("step_plan.md", extra=extra))
            if p is None:
                return ""
            self._planned = (ctx.iteration, p)
            return f"{p.kind}: {p.plan}"
        finally:
            self._end(client)

    def propose(self, ctx: AgentContext) -> list[Proposal]:
        planned = self._planned if self._planned and self._planned[0] == ctx.iteration \
            else None
        self._planned = None
        client = self._begin(ctx, keep=planned is not None)
        try:
            built = self._context(ctx)
            system = self.system_prompt(ctx)
            if planned is None and self.settings.one_call:
                step = "step_small.md" if self.settings.compact else "step_propose.md"
                prop = self._code(client, system, built, ctx, None,
                                  render(step, offer=_offer(ctx)), ProposeAnswer, "propose")
                return [prop] if prop is not None else []
            plan = planned[1] if planned else self._plan(
                client, system, built, ctx, render("step_plan.md", extra=""))
            if plan is None:
                return []
            prop = self._code(client, system, built, ctx, plan,
                              render("step_code.md", plan=_plan_text(plan),
                                     offer=_offer(ctx)))
            return [prop] if prop is not None else []
        finally:
            self._end(client)

    def revise(self, ctx: AgentContext, failed: Proposal) -> Proposal | None:
        """A new candidate after a compile error or a wrong result; a new plan first when
        the feedback asks for one (repeated compile errors of this candidate)."""
        client = self._begin(ctx)
        try:
            fb = ctx.feedback
            built = self._context(ctx, failed=failed)
            system = self.system_prompt(ctx)
            kept = PlanAnswer(bottleneck=failed.bottleneck, plan=failed.plan,
                              kind=failed.change.kind, change_type=failed.change.type,
                              expected_gain=failed.expected_gain, risks=failed.risks,
                              confidence=failed.confidence)
            if fb is not None and fb.kind == "incorrect":
                return self._fix_wrong(client, system, built, ctx, kept, failed)
            attempt = fb.attempt if fb is not None else 1
            replan = fb is not None and fb.kind == "compile-error" and (
                fb.replan or attempt >= MAX_COMPILE_TRIES or REPLAN_MARK in fb.message.lower())
            if replan:
                plan = self._plan(client, system, built, ctx, render(
                    "step_replan.md", attempt=max(attempt, MAX_COMPILE_TRIES),
                    plan=failed.plan))
                if plan is None:
                    return None
                step = render("step_code.md", plan=_plan_text(plan), offer=_offer(ctx))
                return self._code(client, system, built, ctx, plan, step)
            step = render("step_fix.md", attempt=attempt, max_attempts=MAX_COMPILE_TRIES,
                          plan=_plan_text(kept))
            return self._code(client, system, built, ctx, kept, step,
                              edit_base=failed.change.kernel)
        finally:
            self._end(client)

    def _fix_wrong(self, client: LLMClient, system: str, built: FocusedContext,
                   ctx: AgentContext, plan: PlanAnswer, failed: Proposal) -> Proposal | None:
        why, _ = self._ask(client, system, built, ctx, render("step_explain.md"),
                           ExplainAnswer, "explain", _check_explain, failed)
        if not isinstance(why, ExplainAnswer):
            return None
        self.last_explanation = why.model_dump()
        return self._code(client, system, built, ctx, plan, render(
            "step_fix_wrong.md", cause=why.cause, fix=why.fix, plan=_plan_text(plan)),
            edit_base=failed.change.kernel)


def _plan_text(p: PlanAnswer) -> str:
    return (f"Bottleneck: {p.bottleneck}\nPlan ({p.kind}, {p.change_type}):\n{p.plan}\n"
            f"Expected gain: {p.expected_gain:g}x. Risks: {p.risks}")


def make_specialist(name: str, **kwargs: Any) -> LLMSpecialist:
    """The LLM version of a named specialist (settings default to the environment)."""
    return LLMSpecialist(name, FIELDS.get(name), **kwargs)


# read by kernelcrew.agents.specialist (POLICY_MODULES["llm"]): name -> zero-argument factory
SPECIALISTS: dict[str, Callable[[], LLMSpecialist]] = {
    name: partial(make_specialist, name) for name in FIELDS}
