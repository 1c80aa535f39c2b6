"""The coordinator: merges compatible proposals, resolves conflicting ones, says why.

Two proposals conflict when they set the same knob or flag two ways, or rewrite the
same code region. A conflict is resolved by score = expected gain x confidence x the
track record of that kind of change (from memory), and the reason is written down.
Compatible proposals are merged into one candidate by re-applying each change on top
of the previous one (`apply_change`); the best single proposals go too, so a merge
that fails or regresses does not hide a good change.
"""

from __future__ import annotations

from collections.abc import Callable

from kernelcrew.agents.proposal import Decision, Proposal
from kernelcrew.kernels.kernelfile import text_digest

ApplyFn = Callable[[Proposal, str], str | None]  # (proposal, base kernel text) -> new text


def track_record(kind: str, stats: dict[str, dict]) -> float:
    """A multiplier from how this kind of change fared before (1.0 when unknown)."""
    s = stats.get(kind)
    if not s or not s.get("tried"):
        return 1.0
    rate = (s.get("accepted", 0) + 1) / (s["tried"] + 2)  # Laplace-smoothed acceptance rate
    return 0.5 + rate  # 0.5 .. 1.5


def record_note(kind: str, stats: dict[str, dict]) -> str:
    """How memory weighed this kind of change, for the written reason."""
    s = stats.get(kind)
    if not s or not s.get("tried"):
        return "no track record"
    return (f"memory: {kind} tried {s['tried']}x, accepted {s.get('accepted', 0)}x "
            f"-> weight x{track_record(kind, stats):.2f}")


def score(p: Proposal, stats: dict[str, dict]) -> float:
    return max(p.expected_gain - 1.0, 0.01) * p.confidence * track_record(p.change.kind, stats)


def _conflict(a: Proposal, b: Proposal) -> str | None:
    ka, kb = a.change.knobs or {}, b.change.knobs or {}
    same_knobs = [k for k in ka if k in kb and ka[k] != kb[k]]
    if same_knobs:
        return f"both set knob {same_knobs[0]} ({ka[same_knobs[0]]} vs {kb[same_knobs[0]]})"
    if a.change.flags is not None and b.change.flags is not None and \
            sorted(a.change.flags) != sorted(b.change.flags):
        return f"both set the flags ({' '.join(a.change.flags)} vs {' '.join(b.change.flags)})"
    overlap = set(a.change.regions) & set(b.change.regions)
    if overlap:
        return f"both rewrite {min(overlap)}"
    if a.change.type == "source" and b.change.type == "source" and not (
            a.change.regions and b.change.regions):
        return "two whole-kernel rewrites"
    return None


def _digest(text: str) -> str:
    return text_digest(text)


def coordinate(proposals: list[Proposal], base_kernel: str, *, stats: dict[str, dict] | None = None,
               apply: ApplyFn | None = None, max_candidates: int = 3,
               tried_digests: set[str] | None = None) -> Decision:
    """Pick up to `max_candidates` candidates from the specialists' proposals."""
    stats = stats or {}
    tried_digests = tried_digests or set()
    ranked = sorted(proposals, key=lambda p: score(p, stats), reverse=True)
    rejected: list[str] = []
    # resolve conflicts greedily, best score first
    chosen: list[Proposal] = []
    for p in ranked:
        clash = next(((q, why) for q in chosen if (why := _conflict(p, q))), None)
        if clash:
            q, why = clash
            rejected.append(f"{p.author}/{p.change.kind}: conflicts with {q.author}/{q.change.kind}"
                            f" ({why}); kept {q.author}'s, score {score(q, stats):.3f} > "
                            f"{score(p, stats):.3f} (gain x confidence x track record; "
                            f"{record_note(p.change.kind, stats)})")
            continue
        chosen.append(p)
    candidates: list[Proposal] = []
    merged_from: list[list[str]] = []
    reasons: list[str] = []
    # 1) everything compatible merged into one candidate
    if len(chosen) > 1 and apply is not None:
        text, parts = chosen[0].change.kernel, [chosen[0]]
        for p in chosen[1:]:
            new = apply(p, text)
            if new is None:
                rejected.append(f"{p.author}/{p.change.kind}: could not be merged on top of "
                                f"{'+'.join(q.change.kind for q in parts)}; kept on its own")
                continue
            text, parts = new, parts + [p]
        if len(parts) > 1:
            merged = Proposal(
                author="+".join(q.author for q in parts),
                bottleneck=parts[0].bottleneck,
                plan=" Then: ".join(q.plan for q in parts),
                change=parts[0].change.model_copy(update={
                    "kernel": text, "kind": "+".join(q.change.kind for q in parts),
                    "regions": sorted({r for q in parts for r in q.change.regions}),
                    "type": "source"}),
                expected_gain=min(10.0, float(_prod(q.expected_gain for q in parts))),
                risks="; ".join(q.risks for q in parts),
                confidence=min(q.confidence for q in parts),
            )
            candidates.append(merged)
            merged_from.append([q.author for q in parts])
            reasons.append(f"merged {len(parts)} compatible changes "
                           f"({', '.join(q.author + '/' + q.change.kind for q in parts)})")
    # 2) the best single proposals, so a failing merge does not hide a good change
    for p in chosen:
        if len(candidates) >= max_candidates:
            rejected.append(f"{p.author}/{p.change.kind}: over the budget of {max_candidates} "
                            "candidates this iteration")
            continue
        candidates.append(p)
        merged_from.append([p.author])
        reasons.append(f"{p.author}/{p.change.kind} on its own (score {score(p, stats):.3f}; "
                       f"{record_note(p.change.kind, stats)})")
    # drop duplicates and kernels already evaluated
    seen: set[str] = set()
    final, final_from = [], []
    for c, f in zip(candidates, merged_from, strict=True):
        d = _digest(c.change.kernel)
        if d in seen or d in tried_digests or c.change.kernel.strip() == base_kernel.strip():
            rejected.append(f"{c.author}/{c.change.kind}: same kernel as one already evaluated")
            continue
        seen.add(d)
        final.append(c)
        final_from.append(f)
    reason = "; ".join(reasons) if final else "no new candidate: every proposal was a duplicate " \
                                              "or lost a conflict"
    return Decision(candidates=final, merged_from=final_from, rejected=rejected, reason=reason)


def _prod(xs) -> float:
    out = 1.0
    for x in xs:
        out *= x
    return out
