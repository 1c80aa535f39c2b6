"""An LLM coordinator: the model chooses which proposals go to evaluation and says why.

Same inputs and output (`Decision`) as the heuristic `coordinate`. The model sees each
proposal's summary (not its kernel text), the profile's diagnosis, the track record of
each kind of change and the tried list; it answers with groups of proposal numbers.
Groups of several are merged with `apply` exactly as the heuristic coordinator merges.
When the answer is unusable after one repair, the heuristic coordinator decides and the
reason says so; `LLMUnavailable` is left to the graph (a clean stop).
"""

from __future__ import annotations

from typing import Any

from langchain_core.messages import HumanMessage, SystemMessage
from pydantic import BaseModel, Field

from kernelcrew.agents.coordinator import (
    ApplyFn,
    coordinate,
    estimate_note,
    record_note,
    score,
)
from kernelcrew.agents.llm.client import LLMClient, PromptTooLarge, new_usage
from kernelcrew.agents.llm.focus import count_tokens
from kernelcrew.agents.llm.prompts import render
from kernelcrew.agents.llm.settings import LLMSettings
from kernelcrew.agents.proposal import Decision, Proposal
from kernelcrew.kernels.kernelfile import text_digest


class CoordinatorAnswer(BaseModel):
    """Which proposals to evaluate this iteration, and why."""

    candidates: list[list[int]] = Field(description="at most N groups of proposal numbers, best "
                                                    "first; a group of several is merged")
    rejected: list[str] = Field(default_factory=list,
                                description='one line per proposal left out: "number: why"')
    reason: str = Field(description="why this choice, at most three sentences")


def proposal_lines(proposals: list[Proposal], stats: dict[str, dict]) -> str:
    """Each proposal: what it changes, its evidence and measured record first, the
    author's own estimate last and marked as such."""
    out = []
    for i, p in enumerate(proposals, 1):
        c = p.change
        what = [f"type {c.type}"]
        if c.transform:
            what.append(f"moves of the catalogue: {c.transform}"
                        + (f" then {', '.join(s[0] for s in c.params.get('then', []))}"
                           if c.params.get("then") else "") + " (legality checked)")
        else:
            what.append("free-form rewrite" if c.type == "source" else "settings")
        if c.flags is not None:
            what.append(f"flags {' '.join(c.flags)}")
        if c.knobs:
            what.append(f"knobs {c.knobs}")
        if c.regions:
            what.append(f"regions {', '.join(c.regions)}")
        out.append(f"{i}. {p.author}/{c.kind} ({'; '.join(what)})\n"
                   f"   measured record: {record_note(c.kind, stats)}; ranking score "
                   f"{score(p, stats):.3f}\n   bottleneck: {p.bottleneck}\n   plan: "
                   f"{p.plan[:600]}\n   risks: {p.risks[:300]}\n   {estimate_note(p)}")
    return "\n".join(out)


class LLMCoordinator:
    """`coordinate()` with the model's choice; `last_usage`/`last_prompt_file` as specialists."""

    name = "coordinator"

    def __init__(self, settings: dict[str, Any] | LLMSettings | None = None, *,
                 run_dir: str | None = None) -> None:
        self.settings = settings if isinstance(settings, LLMSettings) else \
            LLMSettings.resolve(settings)
        self.client = LLMClient(self.settings, agent=self.name, run_dir=run_dir)
        self.last_usage: dict[str, int] = new_usage()
        self.last_prompt_file: str | None = None
        self.last_prompt_files: list[str] = []
        self.last_context: dict[str, Any] | None = None
        self.last_answers: list[dict[str, Any]] = []

    def coordinate(self, proposals: list[Proposal], base_kernel: str, *,
                   stats: dict[str, dict] | None = None, apply: ApplyFn | None = None,
                   max_candidates: int = 3, tried_digests: set[str] | None = None,
                   profile_summary: str = "", tried: list[str] | None = None,
                   iteration: int = 0, run_dir: str | None = None) -> Decision:
        stats = stats or {}
        tried_digests = tried_digests or set()
        if len(proposals) <= 1:  # nothing to choose: no call
            return coordinate(proposals, base_kernel, stats=stats, apply=apply,
                              max_candidates=max_candidates, tried_digests=tried_digests)
        self.client.reset(run_dir=run_dir)
        try:
            context = [f"## Profile\n{profile_summary or 'n/a'}"]
            if stats:
                context.append("## Track record of kinds of change (measured)\n" + "\n".join(
                    f"- {k}: tried {v.get('tried', 0)}, helped "
                    f"{v.get('helped', v.get('accepted', 0))}, failed {v.get('failed', 0)}"
                    for k, v in sorted(stats.items())))
            if tried:
                context.append("## Already tried\n" + "\n".join(f"- {t}" for t in tried[:30]))
            user = "\n\n".join(context) + "\n\n" + render(
                "step_coordinate.md", proposals=proposal_lines(proposals, stats),
                max_candidates=max_candidates)
            self.last_context = {"tokens": count_tokens(user),
                                 "budget": self.settings.context_budget, "trimmed": []}
            n = len(proposals)

            def usable(ans: BaseModel) -> str | None:
                assert isinstance(ans, CoordinatorAnswer)
                if not ans.candidates:
                    return "choose at least one candidate"
                if len(ans.candidates) > max_candidates:
                    return f"at most {max_candidates} candidates"
                bad = [i for g in ans.candidates for i in g if not 1 <= i <= n]
                if bad or any(not g for g in ans.candidates):
                    return f"proposal numbers run from 1 to {n} (got {bad or 'an empty group'})"
                return None

            try:
                ans = self.client.ask(
                    [SystemMessage(render("coordinator.md", max_candidates=max_candidates)),
                     HumanMessage(user)], CoordinatorAnswer, step="coordinate",
                    iteration=iteration, validate=usable)
            except PromptTooLarge as e:  # the heuristic choice needs no context
                ans = None
                self.client.last_error = str(e)
        finally:
            self.last_answers = list(self.client.answers)
            self.last_usage = self.client.spent()
            self.last_prompt_files = list(self.client.files)
            self.last_prompt_file = self.client.files[-1] if self.client.files else None
        if not isinstance(ans, CoordinatorAnswer):
            d = coordinate(proposals, base_kernel, stats=stats, apply=apply,
                           max_candidates=max_candidates, tried_digests=tried_digests)
            d.reason = f"(LLM answer unusable: {self.client.last_error}; heuristic choice) " \
                       + d.reason
            return d
        return self._decision(ans, proposals, base_kernel, apply, tried_digests)

    @staticmethod
    def _decision(ans: CoordinatorAnswer, proposals: list[Proposal], base_kernel: str,
                  apply: ApplyFn | None, tried_digests: set[str]) -> Decision:
        rejected = list(ans.rejected)
        cands: list[Proposal] = []
        merged_from: list[list[str]] = []
        seen: set[str] = set()
        for group in ans.candidates:
            parts = [proposals[i - 1] for i in dict.fromkeys(group)]
            cand = parts[0]
            used = [parts[0]]
            if len(parts) > 1:
                text = parts[0].change.kernel
                for p in parts[1:]:
                    new = apply(p, text) if apply is not None else None
                    if new is None:
                        rejected.append(f"{p.author}/{p.change.kind}: could not be merged on "
                                        f"top of {parts[0].author}/{parts[0].change.kind}")
                        continue
                    text, used = new, [*used, p]
                if len(used) > 1:
                    gain = 1.0
                    for q in used:
                        gain *= q.expected_gain
                    cand = Proposal(
                        author="+".join(q.author for q in used), bottleneck=used[0].bottleneck,
                        plan=" Then: ".join(q.plan for q in used),
                        change=used[0].change.model_copy(update={
                            "kernel": text, "kind": "+".join(q.change.kind for q in used),
                            "regions": sorted({r for q in used for r in q.change.regions}),
                            "type": "source", "transform": None, "params": {}}),
                        expected_gain=min(10.0, gain), risks="; ".join(q.risks for q in used),
                        confidence=min(q.confidence for q in used),
                        estimate="model" if any(q.estimate == "model" for q in used)
                        else "evidence")
            d = text_digest(cand.change.kernel)  # the graph's digest of evaluated kernels
            if d in seen or d in tried_digests or \
                    cand.change.kernel.strip() == base_kernel.strip():
                rejected.append(f"{cand.author}/{cand.change.kind}: same kernel as one already "
                                "evaluated")
                continue
            seen.add(d)
            cands.append(cand)
            merged_from.append([q.author for q in used])
        return Decision(candidates=cands, merged_from=merged_from, rejected=rejected,
                        reason=ans.reason.strip() or "chosen by the LLM coordinator")
