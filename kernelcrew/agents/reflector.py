"""The reflector: why a candidate worked or not, in a few sentences for the memory."""

from __future__ import annotations


def reflect(*, op: str, family: str, backend: str, bottleneck: str, evidence: str, author: str,
            kind: str, plan: str, outcome: str, speedup: float | None, vs_best: float | None,
            detail: str) -> str:
    """A heuristic reflection: what was tried, on what evidence, what happened and why."""
    tried = f"{author} tried {kind} on {op} ({family}, {backend}) because: {plan[:200]}"
    seen = f" Evidence: {bottleneck}; {evidence[:200]}." if evidence else f" Evidence: {bottleneck}."
    if outcome == "accepted":
        why = (f" Accepted: {vs_best:.2f}x over the previous best ({speedup:.2f}x over the "
               f"baseline). The change addressed the {bottleneck} bottleneck.")
    elif outcome in ("slower", "same", "faster-not-best"):
        ratio = f"{vs_best:.2f}x vs the best" if vs_best else "no measurable change"
        why = (f" Not accepted ({outcome}, {ratio}): the change did not address what limits "
               f"this kernel, or its overhead cancelled the gain. {detail[:160]}")
    elif outcome == "compile-error":
        why = f" It did not compile: {detail[:200]}"
    else:
        why = f" Rejected: {detail[:240]}"
    return tried + seen + why
