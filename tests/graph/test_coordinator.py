"""The coordinator resolves conflicts by evidence and writes down why."""

from __future__ import annotations

import re

from kernelcrew.agents.coordinator import coordinate
from kernelcrew.agents.proposal import Change, Proposal
from kernelcrew.kernels.kernelfile import text_digest

BASE = "/* kernelcrew\nentry: f\nflags: [-O2]\nknobs: {TILE: 16}\n*/\nint f;\n"


def prop(author, kind, *, knobs=None, regions=(), gain=1.3, conf=0.6, type_="knobs", text=None):
    return Proposal(author=author, bottleneck="Strided writes. Low bandwidth.", plan=f"{kind} plan",
                    change=Change(type=type_, kind=kind, kernel=text or BASE.replace("16", "32"),
                                  knobs=knobs, regions=list(regions)),
                    expected_gain=gain, risks="none", confidence=conf)


def test_same_knob_two_ways_and_rewrite_conflict_are_resolved_with_reasons():
    a = prop("loop", "knob:TILE", knobs={"TILE": 32}, gain=1.4, conf=0.7,
             text=BASE.replace("TILE: 16", "TILE: 32"))
    b = prop("memory_access", "knob:TILE", knobs={"TILE": 8}, gain=1.2, conf=0.5,
             text=BASE.replace("TILE: 16", "TILE: 8"))
    c = prop("memory_access", "interchange", regions=["loop@7"], type_="source", gain=1.5,
             conf=0.8, text=BASE + "// interchanged\n")
    d = prop("loop", "omp_parallel", regions=["loop@7"], type_="source", gain=1.3, conf=0.5,
             text=BASE + "// parallel\n")
    decision = coordinate([a, b, c, d], BASE, apply=None, max_candidates=3)
    texts = " ".join(decision.rejected)
    # the knob conflict: TILE=32 (score .28) beats TILE=8 (score .10)
    assert "memory_access/knob:TILE: conflicts with loop/knob:TILE" in texts
    assert "both set knob TILE (8 vs 32)" in texts
    # the rewrite conflict: interchange (score .40) beats omp_parallel on the same loop
    assert "loop/omp_parallel: conflicts with memory_access/interchange" in texts
    assert "both rewrite loop@7" in texts
    kinds = [p.change.kind for p in decision.candidates]
    assert kinds == ["interchange", "knob:TILE"]
    assert "interchange on its own" in decision.reason


def test_track_record_from_memory_changes_the_winner():
    a = prop("loop", "knob:TILE", knobs={"TILE": 32}, gain=1.3, conf=0.6,
             text=BASE.replace("TILE: 16", "TILE: 32"))
    b = prop("memory_access", "simd", knobs={"TILE": 8}, gain=1.3, conf=0.6,
             text=BASE.replace("TILE: 16", "TILE: 8"))
    stats = {"knob:TILE": {"tried": 6, "accepted": 0}, "simd": {"tried": 6, "accepted": 6}}
    decision = coordinate([a, b], BASE, stats=stats)
    assert [p.change.kind for p in decision.candidates] == ["simd"]
    assert "track record" in " ".join(decision.rejected)


def test_compatible_changes_are_merged_into_one_candidate():
    a = prop("loop", "omp_parallel", regions=["loop@7"], type_="source", text=BASE + "// a\n")
    b = prop("compiler_flags", "flags", type_="flags", text=BASE.replace("-O2", "-O3"))
    b.change.flags = ["-O3"]

    def apply(p, text):  # the flags change re-applied on top of another text
        return text.replace("-O2", "-O3")

    decision = coordinate([a, b], BASE, apply=apply, max_candidates=3)
    merged = decision.candidates[0]
    assert merged.author == "loop+compiler_flags"
    assert "-O3" in merged.change.kernel and "// a" in merged.change.kernel
    assert decision.merged_from[0] == ["loop", "compiler_flags"]
    assert len(decision.candidates) == 3  # the merge plus both on their own


def _three_compatible():
    """Three compatible proposals whose changes compose by appending a line each."""
    a = prop("loop", "simd", regions=["loop@9"], type_="source", gain=2.0, conf=0.8,
             text=BASE + "// simd\n")
    b = prop("loop", "omp_parallel", regions=["loop@7"], type_="source", gain=1.7, conf=0.8,
             text=BASE + "// omp\n")
    c = prop("memory_access", "vector_math", regions=["call@12"], type_="source", gain=1.5,
             conf=0.6, text=BASE + "// vecmath\n")

    def apply(p, text):
        return text + p.change.kernel[len(BASE):]

    return [a, b, c], apply


def test_without_memory_the_best_single_proposals_hedge_the_merge():
    props, apply = _three_compatible()
    decision = coordinate(props, BASE, apply=apply, max_candidates=3)
    kinds = [p.change.kind for p in decision.candidates]
    assert kinds == ["simd+omp_parallel+vector_math", "simd", "omp_parallel"]
    assert "vector_math: over the budget" in " ".join(decision.rejected)


def test_memory_that_vouches_for_every_part_drops_the_hedges():
    props, apply = _three_compatible()
    # an earlier run of the family: the merge was accepted, the parts alone beat the baseline
    stats = {"simd+omp_parallel+vector_math": {"tried": 1, "accepted": 1, "helped": 1},
             "simd": {"tried": 1, "accepted": 0, "helped": 1},
             "omp_parallel": {"tried": 1, "accepted": 0, "helped": 1}}
    decision = coordinate(props, BASE, stats=stats, apply=apply, max_candidates=3)
    assert [p.change.kind for p in decision.candidates] == ["simd+omp_parallel+vector_math"]
    assert "no hedge candidates (memory: every part of the merge helped before" in \
        " ".join(decision.rejected)


def test_memory_for_some_parts_hedges_with_the_merge_of_the_proven_parts():
    props, apply = _three_compatible()
    stats = {"simd+omp_parallel": {"tried": 1, "accepted": 1, "helped": 1}}
    decision = coordinate(props, BASE, stats=stats, apply=apply, max_candidates=3)
    assert [p.change.kind for p in decision.candidates] == [
        "simd+omp_parallel+vector_math", "simd+omp_parallel"]
    assert "hedge: the merge without the parts memory has no record of " \
           "(memory: memory_access/vector_math)" in decision.reason


def test_a_part_that_failed_before_is_kept_out_of_the_merge_until_nothing_else_is_left():
    props, apply = _three_compatible()
    stats = {"simd+omp_parallel": {"tried": 1, "accepted": 1, "helped": 1},
             "vector_math": {"tried": 2, "accepted": 0, "helped": 0, "failed": 2}}
    decision = coordinate(props, BASE, stats=stats, apply=apply, max_candidates=3)
    assert [p.change.kind for p in decision.candidates] == ["simd+omp_parallel"]
    assert "vector_math: kept out of the merge (vector_math helped 0 of 2 tries, failed 2" in \
        " ".join(decision.rejected)
    # once the merge is a tried kernel, the parts go on their own, the discredited one last
    tried = {text_digest(decision.candidates[0].change.kernel)}
    again = coordinate(props, BASE, stats=stats, apply=apply, max_candidates=3,
                       tried_digests=tried)
    assert [p.change.kind for p in again.candidates] == ["simd", "omp_parallel", "vector_math"]
    # a failed merge is ambiguous: it counts as a try for its parts, not as a failure
    blamed = {"simd+omp_parallel": {"tried": 1, "accepted": 0, "helped": 0, "failed": 1}}
    assert coordinate(props, BASE, stats=blamed, apply=apply).candidates[0].change.kind == \
        "simd+omp_parallel+vector_math"


def test_two_rewrites_of_one_loop_are_merged_when_the_second_still_applies():
    a = prop("loop", "vector_math", regions=["loop@9"], type_="source", gain=1.6, conf=0.7,
             text=BASE + "// vecmath\n")
    b = prop("loop", "simd", regions=["loop@9"], type_="source", gain=1.5, conf=0.7,
             text=BASE + "// simd\n")
    c = prop("loop", "unroll", regions=["loop@9"], type_="source", gain=1.1, conf=0.4,
             text=BASE + "// unroll\n")

    def apply(p, text):  # unroll no longer applies to the rewritten loop
        return None if p.change.kind == "unroll" else text + p.change.kernel[len(BASE):]

    decision = coordinate([a, b, c], BASE, apply=apply, max_candidates=3)
    # the merge, then the best single proposals by score (unroll's is lowest)
    assert [p.change.kind for p in decision.candidates] == ["vector_math+simd", "vector_math",
                                                            "simd"]
    notes = " ".join(decision.rejected)
    assert "loop/unroll: could not be merged on top of vector_math+simd" in notes
    assert "loop/unroll: over the budget" in notes
    # when memory vouches for the merge, the part that could not be merged takes a slot
    stats = {"vector_math+simd": {"tried": 1, "accepted": 1, "helped": 1}}
    vouched = coordinate([a, b, c], BASE, stats=stats, apply=apply, max_candidates=3)
    assert [p.change.kind for p in vouched.candidates] == ["vector_math+simd", "unroll"]
    # without a way to re-apply changes, the same two rewrites conflict
    alone = coordinate([a, b], BASE, apply=None)
    assert [p.change.kind for p in alone.candidates] == ["vector_math"]
    assert "both rewrite loop@9" in " ".join(alone.rejected)


def test_a_knob_ladder_is_evaluated_as_alternatives_set_in_the_merge():
    two = prop("loop", "knob:TILE", knobs={"TILE": 32}, gain=1.08, conf=0.4,
               text=BASE.replace("TILE: 16", "TILE: 32"))
    eight = prop("loop", "knob:TILE", knobs={"TILE": 128}, gain=1.08, conf=0.35,
                 text=BASE.replace("TILE: 16", "TILE: 128"))
    flags = prop("compiler_flags", "flags", type_="flags", gain=1.3, conf=0.8,
                 text=BASE.replace("-O2", "-O3"))
    flags.change.flags = ["-O3"]

    def apply(p, text):  # replays a flags or knob change on another text
        if p.change.type == "flags":
            return text.replace("-O2", "-O3")
        return re.sub(r"TILE: \d+", f"TILE: {p.change.knobs['TILE']}", text)

    decision = coordinate([two, eight, flags], BASE, apply=apply, max_candidates=3)
    texts = [c.change.kernel for c in decision.candidates]
    assert "-O3" in texts[0] and "TILE: 32" in texts[0]  # the merge: the first rung
    assert "-O3" in texts[1] and "TILE: 128" in texts[1]  # the second rung, in the merge
    assert "another rung of the ladder in the merge" in decision.reason
    assert "conflicts with" not in " ".join(decision.rejected)
    # on their own (nothing to merge with) the rungs follow each other
    alone = coordinate([eight, two], BASE, apply=apply, max_candidates=3)
    assert [c.change.knobs for c in alone.candidates] == [{"TILE": 32}, {"TILE": 128}]


def test_an_llms_own_estimate_is_shown_and_never_ranked_on():
    rule = prop("loop", "omp_parallel", type_="source", regions=["loop@7"], gain=1.3,
                conf=0.6, text=BASE + "// threads\n")
    boast = prop("memory_access", "rewrite", type_="source", gain=10.0, conf=1.0,
                 text=BASE + "// a bold rewrite\n")
    boast.estimate = "model"
    d = coordinate([boast, rule], BASE, max_candidates=1)
    # the rule's evidence (gain x confidence from the profile's numbers) beats the claim
    assert [p.author for p in d.candidates] == ["loop"]
    assert "the author's own estimate 10.00x at confidence 1.00, not ranked on" in \
        " ".join(d.rejected)
    # the same claim at 1.01x ranks the same: the estimate does not count
    meek = boast.model_copy(update={"expected_gain": 1.01, "confidence": 0.1})
    from kernelcrew.agents.coordinator import score
    assert score(meek, {}) == score(boast, {})


def test_a_measured_track_record_lifts_a_model_proposal_above_a_rules_guess():
    rule = prop("loop", "unroll", type_="source", gain=1.2, conf=0.4, text=BASE + "// u\n")
    model = prop("memory_access", "vector_math", type_="source", gain=1.0, conf=0.1,
                 text=BASE + "// vm\n")
    model.estimate = "model"
    model.change.transform = "vector_math"  # a move of the catalogue: legality checked
    stats = {"vector_math": {"tried": 5, "helped": 5, "failed": 0},
             "unroll": {"tried": 5, "helped": 0, "failed": 5}}
    d = coordinate([rule, model], BASE, stats=stats, max_candidates=1)
    assert [p.author for p in d.candidates] == ["memory_access"]
    assert "vector_math helped 5 of 5 tries" in d.reason
