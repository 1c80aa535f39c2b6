"""The coordinator: merges compatible proposals, resolves conflicting ones, says why.

Two proposals conflict when they set the same knob or flag two ways, or are two free-form
rewrites of the whole kernel; two rewrites of the same code region conflict only when the
coordinator cannot re-apply one on top of the other. A conflict is resolved by score, and
the reason is written down. The score is the evidence behind a proposal times the track
record of its kind of change (from memory, measured). The evidence of a rule-based
proposal is its expected gain x confidence, which its rules derive from the profile's
numbers and the source; an LLM's own estimate is its claim, not evidence: it is shown and
never ranked on, so an LLM proposal starts from a fixed prior (higher for a move of the
catalogue, whose legality the catalogue checked) and rises or falls with the record.

Compatible proposals are merged into one candidate by re-applying each change on top
of the previous one (`apply_change`). The other candidates of the iteration are hedges, so
a merge that fails or regresses does not hide a good change; memory decides how many are
needed (`kernelcrew.agents.record`):

- no track record (an empty store): the best single proposals go too;
- every part of the merge helped before on this family and backend and never failed on its
  own: no hedge, the merge alone is evaluated (if it fails after all, the parts come back
  the next iteration as single candidates, since the merge is then a tried kernel);
- some parts proven, some not: one hedge, the merge of the proven parts;
- a part that failed before and never helped is kept out of the merge and tried on its own
  only when no merge is left to evaluate.
"""

from __future__ import annotations

from collections.abc import Callable

from kernelcrew.agents.proposal import Decision, Proposal
from kernelcrew.agents.record import KindRecord, acceptance_weight, kind_records, parts
from kernelcrew.kernels.kernelfile import text_digest

ApplyFn = Callable[[Proposal, str], str | None]  # (proposal, base kernel text) -> new text


def track_record(kind: str, stats: dict[str, dict]) -> float:
    """A multiplier from how this kind of change fared before (1.0 when unknown)."""
    return acceptance_weight(kind, kind_records(stats))


def record_note(kind: str, stats: dict[str, dict]) -> str:
    """How memory weighed this kind of change, for the written reason."""
    recs = kind_records(stats)
    known = [recs[k].note(k) for k in parts(kind) if k in recs and recs[k].tried]
    if not known:
        return "no track record"
    return f"memory: {'; '.join(known)} -> weight x{acceptance_weight(kind, recs):.2f}"


MODEL_PRIOR = 0.1  # an LLM proposal before any record: a rule's gain 1.2 at confidence 0.5
CATALOGUE_EVIDENCE = 1.5  # a move of the catalogue: applied and legality-checked by it


def evidence(p: Proposal) -> float:
    """What the proposal's evidence is worth, the author's own claim left out."""
    if p.estimate == "model":
        return MODEL_PRIOR * (CATALOGUE_EVIDENCE if p.change.transform else 1.0)
    return max(p.expected_gain - 1.0, 0.01) * p.confidence


def score(p: Proposal, stats: dict[str, dict]) -> float:
    return evidence(p) * track_record(p.change.kind, stats)


def estimate_note(p: Proposal) -> str:
    """The author's own estimate, as shown (and why it does not count, for an LLM's)."""
    if p.estimate == "model":
        return (f"the author's own estimate {p.expected_gain:.2f}x at confidence "
                f"{p.confidence:.2f}, not ranked on")
    return f"rules' estimate {p.expected_gain:.2f}x at confidence {p.confidence:.2f}"


def _conflict(a: Proposal, b: Proposal, *, can_merge: bool = False) -> str | None:
    """Why `a` and `b` cannot both go ahead, or None. With `can_merge` (the coordinator can
    re-apply changes on top of each other), two rewrites of one region are left to the
    merge: the second is re-applied to the first's result and, if it no longer applies,
    kept out of the merge and evaluated on its own."""
    if (a.change.transform == "compiler") != (b.change.transform == "compiler"):
        return "a compiler change is raced on the others' kernel, beside it"
    ka, kb = a.change.knobs or {}, b.change.knobs or {}
    same_knobs = [k for k in ka if k in kb and ka[k] != kb[k]]
    if same_knobs:
        return f"both set knob {same_knobs[0]} ({ka[same_knobs[0]]} vs {kb[same_knobs[0]]})"
    if a.change.flags is not None and b.change.flags is not None and \
            sorted(a.change.flags) != sorted(b.change.flags):
        return f"both set the flags ({' '.join(a.change.flags)} vs {' '.join(b.change.flags)})"
    overlap = set(a.change.regions) & set(b.change.regions)
    if overlap and not can_merge:
        return f"both rewrite {min(overlap)}"
    if a.change.type == "source" and b.change.type == "source" and not (
            a.change.regions and b.change.regions):
        return "two whole-kernel rewrites"
    return None


def _knob_alternative(p: Proposal, q: Proposal) -> bool:
    """`p` and `q` are rungs of one specialist's ladder: knob changes by the same author,
    `p` setting only knobs that `q` sets too, to other values. (Two specialists that want
    one knob two ways are a conflict, resolved by score.)"""
    if p.change.transform == "compiler" and q.change.transform != "compiler":
        return True  # the chosen change (or the merge it is in) built by another compiler
    kp, kq = p.change.knobs or {}, q.change.knobs or {}
    return (p.author == q.author and p.change.type == q.change.type == "knobs" and bool(kp)
            and set(kp) <= set(kq)) or _param_alternative(p, q)


def _param_alternative(p: Proposal, q: Proposal) -> bool:
    """`p` and `q` are the same transformation by one author with other parameters (an
    unroll-and-jam factor of 4 and of 8): alternatives of one move, not a conflict."""
    return (p.author == q.author and p.change.type == q.change.type == "source"
            and bool(p.change.transform) and p.change.transform == q.change.transform
            and p.change.kind == q.change.kind and p.change.params != q.change.params)


def _rung(p: Proposal, q: Proposal) -> str:
    """What rung `p` of a ladder sets that rung `q` does not: `BLOCK=64`, `factor=8`,
    `then unroll_and_jam(factor=4)`."""
    mine, other = p.change.knobs or p.change.params or {}, q.change.knobs or q.change.params or {}
    differ = {k: v for k, v in mine.items() if other.get(k) != v} or mine
    parts = []
    for k, v in differ.items():
        if k == "then" and isinstance(v, list):
            parts += [f"then {step}({', '.join(f'{a}={b}' for a, b in kw.items())})"
                      for step, kw in v]
        else:
            parts.append(f"{k}={v}")
    return ", ".join(parts)


def _label(p: Proposal) -> str:
    return f"{p.author}/{p.change.kind}"


def _alone(p: Proposal, stats: dict[str, dict]) -> str:
    return f"{_label(p)} on its own (score {score(p, stats):.3f}; " \
           f"{record_note(p.change.kind, stats)}; {estimate_note(p)})"


# moves that must see a loop before another move rewrites it: move -> the moves it has to
# come after in a merge. A jammed loop steps by its factor, which `omp_parallel` cannot
# thread, while the jam keeps a `parallel for` already on the loop (jam.worksharing).
# keep_values matches a helper call across two loops: it goes before the moves that inline
# helpers (the views) or rewrite the loops' bodies.
_KEEP_FIRST = ("vector_math", "vector_math_ext", "accumulators", "simd", "unroll", "restrict",
               "omp_parallel", "omp_version", "row_accumulate", "loop_order", "interchange")
APPLY_AFTER = {# threads, private copies and register blocks read the nest as written; a
               # loop stepping by 4 with its leftover loop is one none of them takes
               "unroll_and_jam": ("omp_parallel", "keep_values", "interchange",
                                  "register_block", "private_bins"),
               "register_tile": ("omp_parallel", "keep_values"),
               # the rows are threaded before they are blocked: the block loop keeps the
               # `parallel for` it is given, while one stepping by the block size with
               # its leftover rows after it is a nest omp_parallel cannot prove disjoint
               "register_block": ("omp_parallel", "keep_values"),
               "jam_sweeps": ("omp_parallel", "keep_values", "private_bins", "row_accumulate"),
               # a thread's rows and the blocks of a blocked scan are scanned a vector at a
               # time; a vector-scanned loop is no longer one blocked_scan can split, nor
               # its rows ones the thread analysis reads (vector typedefs, builtins)
               "vector_scan": ("omp_parallel", "omp_version", "blocked_scan", "keep_values"),
               **{k: ("keep_values",) for k in _KEEP_FIRST}}


def apply_order(props: list[Proposal]) -> list[Proposal]:
    """`props` in score order, except that a move of APPLY_AFTER's right side goes just
    before the first move that has to come after it."""
    out = list(props)
    for later, firsts in APPLY_AFTER.items():
        kinds = [p.change.kind for p in out]
        if later not in kinds:
            continue
        at = kinds.index(later)
        ahead = [p for p in out[at + 1:] if p.change.kind in firsts]
        moved = {id(p) for p in ahead}
        out = out[:at] + ahead + [p for p in out[at:] if id(p) not in moved]
    return out


def _merge(props: list[Proposal], apply: ApplyFn,
           notes: list[str]) -> tuple[Proposal | None, list[Proposal]]:
    """One candidate from several compatible proposals, each applied on top of the last
    (in `apply_order`), and the proposals in it; a part that does not apply is left out
    (and noted). None when fewer than two apply."""
    if len(props) < 2:
        return None, []
    props = apply_order(props)
    text, used = props[0].change.kernel, [props[0]]
    for p in props[1:]:
        new = apply(p, text)
        if new is None:
            notes.append(f"{_label(p)}: could not be merged on top of "
                         f"{'+'.join(q.change.kind for q in used)}; kept on its own")
            continue
        text, used = new, used + [p]
    if len(used) < 2:
        return None, []
    return Proposal(
        author="+".join(q.author for q in used),
        bottleneck=used[0].bottleneck,
        plan=" Then: ".join(q.plan for q in used),
        change=used[0].change.model_copy(update={
            "kernel": text, "kind": "+".join(q.change.kind for q in used),
            "regions": sorted({r for q in used for r in q.change.regions}),
            "type": "source"}),
        expected_gain=min(10.0, float(_prod(q.expected_gain for q in used))),
        risks="; ".join(q.risks for q in used),
        confidence=min(q.confidence for q in used),
    ), used


def coordinate(proposals: list[Proposal], base_kernel: str, *, stats: dict[str, dict] | None = None,
               apply: ApplyFn | None = None, max_candidates: int = 3,
               tried_digests: set[str] | None = None) -> Decision:
    """Pick up to `max_candidates` candidates from the specialists' proposals."""
    stats = stats or {}
    tried_digests = tried_digests or set()
    rejected: list[str] = []
    chosen, alternatives = _resolve(proposals, stats, apply, rejected)

    def new_text(c: Proposal) -> bool:
        return text_digest(c.change.kernel) not in tried_digests \
            and c.change.kernel.strip() != base_kernel.strip()

    candidates, merged, in_merge = _plan(chosen, stats, apply, rejected, new_text)
    _add_rungs(candidates, alternatives, merged, in_merge, apply)
    return _keep_budget(candidates, max_candidates, rejected, new_text)


def _resolve(proposals: list[Proposal], stats: dict[str, dict], apply: ApplyFn | None,
             rejected: list[str]) -> tuple[list[Proposal], list[tuple[Proposal, Proposal]]]:
    """Conflicts resolved greedily, best score first: (the proposals kept, the other
    rungs of a chosen move's ladder as (rung, the chosen one))."""
    chosen: list[Proposal] = []
    alternatives: list[tuple[Proposal, Proposal]] = []
    # a compiler change goes last: it is another build of what the others chose
    for p in sorted(proposals, key=lambda p: (p.change.transform != "compiler",
                                              score(p, stats)), reverse=True):
        same_move = next((q for q in chosen if _param_alternative(p, q)), None)
        if same_move is not None:  # another size of a chosen move: evaluated beside it
            alternatives.append((p, same_move))
            continue
        clash = next(((q, why) for q in chosen
                      if (why := _conflict(p, q, can_merge=apply is not None))), None)
        if clash:
            q, why = clash
            if _knob_alternative(p, q):
                alternatives.append((p, q))
                continue
            rejected.append(f"{_label(p)}: conflicts with {_label(q)} ({why}); kept "
                            f"{q.author}'s, score {score(q, stats):.3f} > {score(p, stats):.3f} "
                            f"(evidence x track record; "
                            f"{record_note(p.change.kind, stats)}; {estimate_note(p)})")
            continue
        chosen.append(p)
    return chosen, alternatives


def _plan(chosen: list[Proposal], stats: dict[str, dict], apply: ApplyFn | None,
          rejected: list[str], new_text: Callable[[Proposal], bool]
          ) -> tuple[list[tuple[Proposal, str]], Proposal | None, list[Proposal]]:
    """(candidates with why each is evaluated, the merge or None, the proposals in it):
    the merge of the compatible proposals and its hedges, as memory says (module doc)."""
    records = kind_records(stats)

    def rec(p: Proposal) -> list[tuple[str, KindRecord | None]]:
        return [(k, records.get(k)) for k in parts(p.change.kind)]

    def proven(p: Proposal) -> bool:
        return all(r is not None and r.proven for _, r in rec(p))

    discredited = [p for p in chosen if any(r is not None and r.discredited for _, r in rec(p))]
    pool = [p for p in chosen if p not in discredited]
    candidates: list[tuple[Proposal, str]] = []
    merged, in_merge = _merge(pool, apply, rejected) if apply is not None else (None, [])
    if merged is not None and not new_text(merged):
        rejected.append(f"{_label(merged)}: the merge is a kernel already evaluated; its parts "
                        "go on their own")
        merged = None
    if merged is None:
        return [(p, _alone(p, stats)) for p in pool + discredited], None, in_merge
    candidates.append((merged, f"merged {len(in_merge)} compatible changes ("
                       + ", ".join(_label(q) for q in in_merge) + ")"))
    for p in discredited:
        rejected.append(f"{_label(p)}: kept out of the merge ("
                        + "; ".join(r.note(k) for k, r in rec(p) if r and r.discredited)
                        + " on this family and backend); tried on its own once no merge "
                        "is left")
    sure = [p for p in in_merge if proven(p)]
    unsure = [p for p in in_merge if not proven(p)]
    if not unsure:
        rejected.append("no hedge candidates (memory: every part of the merge helped "
                        "before on this family and backend and never failed: "
                        + "; ".join(records[k].note(k) for p in in_merge
                                    for k in parts(p.change.kind)) + ")")
    elif sure:
        hedge = _merge(sure, apply, rejected)[0] if len(sure) > 1 else sure[0]
        if hedge is not None:
            candidates.append((hedge, "hedge: the merge without the parts memory has no "
                               "record of (memory: " + ", ".join(_label(q) for q in unsure)
                               + ")"))
        rejected.extend(f"{_label(p)}: no hedge on its own (its part of the merge is new; "
                        "the proven parts are the hedge)" for p in unsure)
    outside = [p for p in pool if p not in in_merge]  # could not be merged
    if unsure and not sure:  # nothing known: the best single proposals hedge the merge
        outside = sorted(in_merge + outside, key=lambda p: score(p, stats), reverse=True)
    candidates += [(p, _alone(p, stats)) for p in outside]
    return candidates, merged, in_merge


def _add_rungs(candidates: list[tuple[Proposal, str]],
               alternatives: list[tuple[Proposal, Proposal]], merged: Proposal | None,
               in_merge: list[Proposal], apply: ApplyFn | None) -> None:
    """Other values of a chosen knob (a ladder) go right after the merge, set in it, or
    right after the chosen value when that goes on its own."""
    in_merged_rungs = 0
    for p, q in alternatives:
        if p.change.params.get("alone"):  # raced on the current kernel, outside the merge
            at = next((i + 1 for i, (c, _) in enumerate(candidates) if c is q), len(candidates))
            why = f"{_label(p)}: on the current kernel alone (its merge did not build)"
            candidates.insert(at, (p, why))
            continue
        if merged is not None and q in in_merge and apply is not None:
            if _param_alternative(p, q):  # the merge again, with p in q's place
                redo = _merge([p if x is q else x for x in in_merge], apply, [])[0]
                text = redo.change.kernel if redo is not None else None
            else:
                text = apply(p, merged.change.kernel)
            if text is None:
                continue
            # a compiler rung is named as the merge built by that compiler, so the run
            # records it as tried
            kind = merged.change.kind + (f"+{p.change.kind}"
                                         if p.change.transform == "compiler" else "")
            alt = merged.model_copy(update={
                "plan": f"{merged.plan} Alternative: {p.plan}",
                "change": merged.change.model_copy(update={"kernel": text, "kind": kind})})
            in_merged_rungs += 1
            at = in_merged_rungs
        elif p.change.transform == "compiler" and apply is not None:
            # the chosen change built by the other compiler, not the bare base
            text = apply(p, q.change.kernel)
            if text is None:
                continue
            alt = q.model_copy(update={
                "plan": f"{q.plan} Alternative: {p.plan}",
                "change": q.change.model_copy(update={
                    "kernel": text, "kind": f"{q.change.kind}+{p.change.kind}"})})
            at = next((i + 1 for i, (c, _) in enumerate(candidates) if c is q), len(candidates))
        else:
            alt = p
            at = next((i + 1 for i, (c, _) in enumerate(candidates) if c is q), len(candidates))
        values = _rung(p, q)
        candidates.insert(at, (alt, f"{_label(p)} at {values}: another rung of the ladder "
                                    + ("in the merge" if alt is not p else "on its own")))


def _keep_budget(candidates: list[tuple[Proposal, str]], max_candidates: int,
                 rejected: list[str], new_text: Callable[[Proposal], bool]) -> Decision:
    """The first `max_candidates` new kernels; duplicates and kernels already evaluated
    are dropped with their reason."""
    seen: set[str] = set()
    final: list[Proposal] = []
    reasons: list[str] = []
    for c, why in candidates:
        d = text_digest(c.change.kernel)
        if d in seen or not new_text(c):
            rejected.append(f"{_label(c)}: same kernel as one already evaluated")
            continue
        if len(final) >= max_candidates:
            rejected.append(f"{_label(c)}: over the budget of {max_candidates} candidates this "
                            "iteration")
            continue
        seen.add(d)
        final.append(c)
        reasons.append(why)
    reason = "; ".join(reasons) if final else "no new candidate: every proposal was a duplicate " \
                                              "or lost a conflict"
    return Decision(candidates=final, merged_from=[c.author.split("+") for c in final],
                    rejected=rejected, reason=reason)


def _prod(xs) -> float:
    out = 1.0
    for x in xs:
        out *= x
    return out
