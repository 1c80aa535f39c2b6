"""The shared machinery of the rule-based specialists: candidate moves -> proposals.

A specialist lists moves (a named transformation with parameters, its expected gain and
why) in the order its rules rank them from the evidence; the base class drops kinds
already tried on this kernel, runs each remaining transformation on the current kernel
(a move that does not apply is skipped), and fills every field of the Proposal.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from kernelcrew.agents.context import AgentContext
from kernelcrew.agents.heuristic.evidence import Evidence, evidence
from kernelcrew.agents.proposal import Change, ChangeType, Proposal
from kernelcrew.agents.record import confidence_factor, kind_records
from kernelcrew.agents.transforms import TRANSFORMS, apply_transform, changed_regions, parse_any

MAX_PROPOSALS = 4  # kinds of change per specialist and iteration
_TRIED = re.compile(r"^(?P<kind>\S+) by (?P<author>[^:]+): (?P<outcome>[\w-]+)")


@dataclass
class Move:
    transform: str
    kind: str  # Change.kind
    gain: float  # expected speedup factor
    confidence: float
    why: str  # the bottleneck this move attacks, one sentence
    plan: str
    risks: str
    params: dict[str, Any] = field(default_factory=dict)
    type: ChangeType = "source"


def kind_parts(kind: str) -> list[str]:
    """The changes of a merged kind (`simd+compiler:clang++`): joined by `+`, a `+` that
    ends a name (`clang++`) kept in it."""
    return [k for k in re.split(r"(?<!\+)\+(?=[^+])|(?<=\+\+)\+(?=[^+])", kind) if k]


def tried_kinds(ctx: AgentContext) -> dict[str, str]:
    """kind -> outcome of its last evaluation on this run. A merged candidate ("a+b") that
    was accepted marks each part; one that failed marks only the combination."""
    out: dict[str, str] = {}
    seen: list[tuple[str, str]] = []
    for line in ctx.tried:
        m = _TRIED.match(line)
        if m:
            seen.append((m["kind"], m["outcome"]))
    # within an iteration the accepted candidate counts last: a knob ladder's other value,
    # outdone by the accepted one, does not block the knob
    seen += [(n.kind, n.outcome) for n in sorted(
        ctx.recent, key=lambda n: (n.iteration, n.outcome == "accepted"))]
    for kind, outcome in seen:
        out[kind] = outcome
        if "+" in kind and outcome == "accepted":
            for part in kind_parts(kind):
                out[part] = outcome
    return out


def blocked(kind: str, tried: dict[str, str]) -> bool:
    """A kind is not proposed again once it was evaluated on this kernel without being
    accepted (accepted kinds are in the kernel now; knob and flag moves may continue)."""
    outcome = tried.get(kind)
    return outcome is not None and outcome != "accepted"


def track_factor(kind: str, stats: dict[str, dict]) -> float:
    """Confidence multiplier from memory's record of this kind of change."""
    return confidence_factor(kind, kind_records(stats))


class HeuristicSpecialist:
    """Base class: subclasses set name/field and implement `moves`."""

    name = "heuristic"
    field = ""

    def moves(self, ctx: AgentContext, ev: Evidence) -> list[Move]:
        raise NotImplementedError

    # -- the protocol

    def propose(self, ctx: AgentContext) -> list[Proposal]:
        ev = evidence(ctx)
        if ev.kf is None:
            return []
        tried = tried_kinds(ctx)
        out: list[Proposal] = []
        texts: set[str] = set()
        for mv in self.moves(ctx, ev):
            if blocked(mv.kind, tried):
                continue
            new = apply_transform(mv.transform, ctx.kernel, mv.params)
            if new is None or new in texts:
                continue
            texts.add(new)
            out.append(self._proposal(ctx, ev, mv, new))
        out.sort(key=lambda p: (p.expected_gain - 1.0) * p.confidence, reverse=True)
        kinds = list(dict.fromkeys(p.change.kind for p in out))[:MAX_PROPOSALS]
        return [p for p in out if p.change.kind in kinds]  # a knob's ladder stays whole

    def revise(self, ctx: AgentContext, failed: Proposal) -> Proposal | None:
        """A more conservative variant of a change that failed to compile: drop the last step
        of a sequence, keep only this specialist's part of a merged candidate, or a
        kind-specific fallback; None when there is nothing safer to try."""
        ev = evidence(ctx)
        if ev.kf is None:
            return None
        ch = failed.change
        note = _first_line(ctx.feedback.message) if ctx.feedback else "it failed"
        variants: list[tuple[str, dict[str, Any], str]] = []
        if ch.transform == "sequence" and len(ch.params.get("steps", [])) > 1:
            steps = ch.params["steps"][:-1]
            variants.append(("sequence", {"steps": steps},
                             f"dropped the last step ({ch.params['steps'][-1]['transform']})"))
        if "+" in ch.kind and ch.transform:
            what = f"only {ch.kind.split('+')[0]}, without the changes merged into it"
            variants.append((ch.transform, ch.params, what))
        variants += self.fallbacks(ch.transform or "", ch.params, ev)
        for name, params, what in variants:
            new = apply_transform(name, ctx.kernel, params)
            if new is None or new.strip() == ch.kernel.strip():
                continue
            kind = transform_kind(name, params, ch.kind)
            mv = Move(name, kind, max(1.0, failed.expected_gain * 0.8),
                      max(0.1, failed.confidence * 0.7), why="",
                      plan=f"Revised after '{note[:120]}': {what}. {failed.plan}"[:600],
                      risks=failed.risks, params=params, type=ch.type)
            p = self._proposal(ctx, ev, mv, new)
            return p.model_copy(update={"bottleneck": failed.bottleneck})
        return None

    def fallbacks(self, transform: str, params: dict[str, Any], ev: Evidence
                  ) -> list[tuple[str, dict[str, Any], str]]:
        """Kind-specific safer variants for `revise` (subclasses extend)."""
        return []

    def plan(self, ctx: AgentContext) -> str:
        """What this specialist would try next and why (for plan-first after failures)."""
        ev = evidence(ctx)
        if ev.kf is None:
            return "cannot read the kernel file"
        tried = tried_kinds(ctx)
        todo = [f"{m.kind} (x{m.gain:.2f})" for m in self.moves(ctx, ev)
                if not blocked(m.kind, tried)]
        return f"{ev.headline()} Next: {', '.join(todo) or 'nothing in my field'}."

    # -- helpers

    def _proposal(self, ctx: AgentContext, ev: Evidence, mv: Move, new: str) -> Proposal:
        base = parse_any(ctx.kernel)
        after = parse_any(new)
        flags = list(after.meta.flags) if mv.type == "flags" else None
        knobs = None
        if mv.type == "knobs" or after.meta.knobs != base.meta.knobs:
            knobs = {k: v for k, v in after.meta.knobs.items() if base.meta.knobs.get(k) != v}
            knobs = knobs or None
        regions = changed_regions(ctx.kernel, new)
        # three sentences: the numbers, the hot loop's access, what this move attacks
        bottleneck = " ".join(s for s in (ev.headline(), ev.access_sentence(), mv.why) if s)
        confidence = min(0.95, mv.confidence * track_factor(mv.kind, ctx.change_stats))
        return Proposal(
            author=self.name,
            bottleneck=bottleneck,
            plan=mv.plan,
            change=Change(type=mv.type, kind=mv.kind, kernel=new, flags=flags, knobs=knobs,
                          regions=regions, transform=mv.transform, params=mv.params),
            expected_gain=round(mv.gain, 2),
            risks=mv.risks,
            confidence=round(confidence, 2),
        )


def transform_kind(name: str, params: dict[str, Any], default: str) -> str:
    """The Change.kind of a (transform, params) pair; `default` when it refines it
    ("flags:unroll" for the flags transform)."""
    if name == "knobs":
        keys = sorted((params.get("values") or {}).keys())
        return f"knob:{keys[0]}" if len(keys) == 1 else default
    if name == "sequence":
        return default.split("+")[0] if default else "sequence"
    t = TRANSFORMS.get(name)
    if t is None or default.split(":")[0] == t.kind:
        return default
    return t.kind


def _first_line(text: str) -> str:
    return next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
