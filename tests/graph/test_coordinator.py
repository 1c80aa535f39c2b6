"""The coordinator resolves conflicts by evidence and writes down why."""

from __future__ import annotations

from kernelcrew.agents.coordinator import coordinate
from kernelcrew.agents.proposal import Change, Proposal

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
