"""The heuristic specialists: valid, honest proposals from a profile or from the source alone,
the tried list respected, knobs searched one step, revise, and the registry."""

from __future__ import annotations

import importlib.metadata
import os

import pytest

from kernelcrew.agents import specialist as registry
from kernelcrew.agents.context import AgentContext, Feedback, IterationNote
from kernelcrew.agents.coordinator import coordinate
from kernelcrew.agents.heuristic.base import MAX_PROPOSALS
from kernelcrew.agents.proposal import Proposal
from kernelcrew.agents.specialist import (
    SpecialistNotFound,
    get_specialist,
    register_specialist,
    specialist_names,
    unregister_specialist,
)
from kernelcrew.agents.transforms import apply_change, apply_transform, parse_any
from kernelcrew.kernels.spec import load_op
from kernelcrew.results import Diagnosis, HotRegion, Metric, ProfileResult, Roofline
from kernelcrew.tools.judge.check import check
from tests.agents.conftest import OPS, QUICK, baseline_text

BUILTIN = ["memory_access", "loop", "compiler_flags"]



def ctx_for(op: str, kernel: str | None = None, backend: str = "cpu", **kw) -> AgentContext:
    return AgentContext(op=op, family="test", description=op, backend=backend, signature="",
                        tolerance="rtol=1e-4", kernel=kernel or baseline_text(op, backend), **kw)


def cpu_profile(op: str, *, kind="latency-bound", bw_pct=6.9, stride=2048.0, vec=0.0,
                threads=1.0) -> ProfileResult:
    """A CPU profile as tools/profile.py writes it (numbers from a real transpose run)."""
    m = {
        "time_ms": Metric(value=120.0, unit="ms"),
        "achieved_bandwidth": Metric(value=0.28, unit="GB/s"),
        "peak_bandwidth": Metric(value=4.05, unit="GB/s", reason="STREAM triad"),
        "bandwidth_pct": Metric(value=bw_pct, unit="%"),
        "compute_pct": Metric(value=0.0, unit="%"),
        "threads_launched": Metric(value=threads, unit="threads"),
        "threads_available": Metric(value=2.0, unit="threads"),
        "threads_busy": Metric(value=threads, unit="threads"),
        "hot_loop_stride": Metric(value=stride, unit="elements",
                                  reason="y[] stride rows in the loop at line 12"),
        "hot_loop_vector_bytes": Metric(value=vec, unit="bytes",
                                        reason="line 11: not vectorized (-O2 cheap cost model)"),
    }
    roof = Roofline(time_ms=120.0, bytes=33554432, flops=0, achieved_gbps=0.28, peak_gbps=4.05,
                    achieved_gflops=0.0, peak_gflops=67.5, bandwidth_share=bw_pct / 100,
                    compute_share=0.0, intensity=0.0, bound_ms=8.3)
    return ProfileResult(op=op, kernel="baseline.cpp", backend="cpu",
                         case="typical[0] rows=2048,cols=2048", source="cpu", summary="...",
                         metrics=m, roofline=roof,
                         bottleneck=Diagnosis(kind=kind, evidence="Neither roof is near."))


def all_proposals(ctx: AgentContext) -> list[Proposal]:
    out = []
    for name in BUILTIN:
        props = get_specialist(name).propose(ctx)
        assert len({p.change.kind for p in props}) <= MAX_PROPOSALS  # a ladder stays whole
        scores = [(p.expected_gain - 1) * p.confidence for p in props]
        assert scores == sorted(scores, reverse=True), f"{name}: not best first"
        out += props
    return out


def assert_valid(p: Proposal, ctx: AgentContext) -> None:
    assert p.author in BUILTIN
    assert p.bottleneck and p.plan and p.risks
    assert p.bottleneck.count(". ") <= 2  # at most three sentences
    assert p.expected_gain >= 1.0 and 0 < p.confidence <= 1
    new = parse_any(p.change.kernel)  # a complete, valid kernel file
    assert new.text != ctx.kernel
    assert p.change.transform, "heuristic changes are re-appliable"
    # re-applying the change to the base it was made on gives the same kernel
    assert apply_change(p.change, ctx.kernel) == p.change.kernel
    if p.change.type == "flags":
        assert p.change.flags == new.meta.flags
    else:
        assert p.change.type == "knobs" or p.change.regions, p.change.kind
    if p.change.type == "knobs":
        assert p.change.knobs and all(new.meta.knobs[k] == v for k, v in p.change.knobs.items())


@pytest.mark.parametrize("op", OPS)
def test_proposals_from_the_source_alone(op):
    ctx = ctx_for(op)
    props = all_proposals(ctx)
    kinds = {p.change.kind for p in props}
    assert {"flags", "omp_parallel"} <= kinds
    assert ("simd" in kinds) == (op != "transpose")  # a strided store is not vectorized
    for p in props:
        assert_valid(p, ctx)
        assert "no profile" in p.bottleneck
    specific = {"small_matmul": "interchange", "add_gelu_muladd": "fusion", "transpose": "tile"}
    if op in specific:
        assert specific[op] in kinds


def test_proposals_cite_the_profile_numbers():
    ctx = ctx_for("transpose", profile=cpu_profile("transpose"))
    props = all_proposals(ctx)
    for p in props:
        assert_valid(p, ctx)
        assert "0.3 of 4.0 GB/s (7% of peak)" in p.bottleneck
    tile = next(p for p in props if p.change.kind == "tile")
    assert "stride 2048 elements" in tile.bottleneck
    assert tile.change.knobs == {"TILE": 32}
    assert tile.expected_gain > 1.5


def test_libm_hot_spots_make_vector_math_the_first_loop_move():
    prof = cpu_profile("add_gelu_muladd", stride=1.0).model_copy(update={"hot_regions": [
        HotRegion(where="libm erff called from the kernel", share=0.55),
        HotRegion(where="loop l.20-23", share=0.10, what="float v = y[i * cols + j];")]})
    ctx = ctx_for("add_gelu_muladd", profile=prof)
    props = get_specialist("loop").propose(ctx)
    assert props[0].change.kind == "vector_math"
    assert "55% of samples in libm erff" in props[0].bottleneck
    assert "kc_erff(" in parse_any(props[0].change.kernel).body
    assert_valid(props[0], ctx)


def test_threads_not_proposed_when_the_profile_shows_them_busy():
    text = apply_transform("omp_parallel", baseline_text("rmsnorm"))
    ctx = ctx_for("rmsnorm", kernel=text, profile=cpu_profile("rmsnorm", threads=2.0))
    kinds = [p.change.kind for p in get_specialist("loop").propose(ctx)]
    assert "omp_parallel" not in kinds and "simd" in kinds


def test_tried_kinds_are_not_proposed_again():
    recent = [IterationNote(iteration=1, author="memory_access", kind="interchange",
                            outcome="slower", speedup=0.7)]
    tried = ["simd by loop: same 1.02x"]
    ctx = ctx_for("small_matmul", recent=recent, tried=tried)
    kinds = {p.change.kind for p in all_proposals(ctx)}
    assert "interchange" not in kinds and "simd" not in kinds
    assert "omp_parallel" in kinds
    # a failed merge does not block its parts; an accepted one is in the kernel already
    merged = [IterationNote(iteration=1, author="a+b", kind="interchange+simd",
                            outcome="same")]
    kinds = {p.change.kind for p in all_proposals(ctx_for("small_matmul", recent=merged))}
    assert {"interchange", "simd"} <= kinds


def test_threading_that_regressed_a_group_comes_back_with_a_higher_threshold():
    note = IterationNote(iteration=1, author="loop", kind="omp_parallel", outcome="same",
                         detail="3.04x overall but the unaligned group regresses (0.26x); "
                                "not accepted")
    props = get_specialist("loop").propose(ctx_for("scale_shift_sum", recent=[note]))
    par = [p for p in props if p.change.kind.startswith("omp_parallel")]
    assert [p.change.kind for p in par] == ["omp_parallel:large"]
    assert "unaligned group regressed" in par[0].bottleneck
    assert parse_any(par[0].change.kernel).meta.knobs["OMP_MIN_WORK"] == 1 << 23
    # a second regression raises it once more, a third gives up on threads
    again = note.model_copy(update={"kind": "omp_parallel:large", "iteration": 2})
    props = get_specialist("loop").propose(ctx_for("scale_shift_sum", recent=[note, again]))
    par = [p for p in props if p.change.kind.startswith("omp_parallel")]
    assert [p.change.kind for p in par] == ["omp_parallel:huge"]
    assert parse_any(par[0].change.kernel).meta.knobs["OMP_MIN_WORK"] == 1 << 25
    third = note.model_copy(update={"kind": "omp_parallel:huge", "iteration": 3})
    props = get_specialist("loop").propose(ctx_for("scale_shift_sum",
                                                   recent=[note, again, third]))
    assert not [p for p in props if p.change.kind.startswith("omp_parallel")]


def test_register_block_is_proposed_once_the_matmul_is_interchanged():
    mem = get_specialist("memory_access")
    base = baseline_text("small_matmul")
    assert "register_block" not in {p.change.kind for p in mem.propose(ctx_for("small_matmul"))}
    ikj = apply_transform("simd", apply_transform("interchange", base))
    ctx = ctx_for("small_matmul", kernel=ikj)
    rb = [p for p in mem.propose(ctx) if p.change.kind == "register_block"]
    assert len(rb) == 1
    assert_valid(rb[0], ctx)
    # float: 32 columns, four 32-byte vectors (the value the code defines is the knob's)
    assert rb[0].change.knobs == {"RB": 4, "JB": 32} and "RB=4" in rb[0].plan
    assert "#define JB 32" in rb[0].change.kernel
    assert "[RB][JB]" in parse_any(rb[0].change.kernel).body
    # blocked already, or blocking tried and lost: not proposed again
    done = ctx_for("small_matmul", kernel=rb[0].change.kernel)
    assert "register_block" not in {p.change.kind for p in mem.propose(done)}
    tried = ["register_block by memory_access: slower 0.8x"]
    lost = ctx_for("small_matmul", kernel=ikj, tried=tried)
    assert "register_block" not in {p.change.kind for p in mem.propose(lost)}


def test_loop_order_is_proposed_where_the_move_applies_and_not_after_it():
    """The convolution's strided walk is in a middle loop, which the innermost-loop stride
    facts do not see: the move's own check is the evidence."""
    mem = get_specialist("memory_access")
    ctx = ctx_for("conv1d_causal", kernel=load_op("conv1d_causal").baseline_path(
        "cpu").read_text())
    lo = [p for p in mem.propose(ctx) if p.change.kind == "loop_order"]
    assert len(lo) == 1
    assert_valid(lo[0], ctx)
    swapped = ctx_for("conv1d_causal", kernel=lo[0].change.kernel)
    assert "loop_order" not in {p.change.kind for p in mem.propose(swapped)}


def test_tile_knob_is_searched_one_step_in_the_direction_the_cache_allows():
    tiled = apply_transform("tile", baseline_text("transpose"))
    ctx = ctx_for("transpose", kernel=tiled, profile=cpu_profile("transpose", stride=1.0))
    knob = [p for p in get_specialist("memory_access").propose(ctx)
            if p.change.kind == "knob:TILE"]
    assert len(knob) == 1
    assert knob[0].change.type == "knobs" and knob[0].change.knobs == {"TILE": 64}
    assert "L1" in knob[0].bottleneck
    # at 64 the next doubling no longer fits L1: no further step is proposed
    at64 = apply_transform("knobs", tiled, {"values": {"TILE": 64}})
    assert not [p for p in get_specialist("memory_access").propose(ctx_for(
        "transpose", kernel=at64)) if p.change.kind == "knob:TILE"]


def test_cuda_proposals_from_ptxas_resources():
    m = {"registers_per_thread": Metric(value=96, unit="registers"),
         "theoretical_occupancy_pct": Metric(value=33.0, unit="%"),
         "spill_stores_bytes": Metric(value=0, unit="bytes"),
         "block_threads": Metric(value=256, unit="threads")}
    prof = ProfileResult(op="rmsnorm", kernel="baseline.cu", backend="cuda",
                         case="typical[0]", source="compile-only", summary="...", metrics=m,
                         bottleneck=Diagnosis(kind="memory-bound", evidence="inferred",
                                              measured=False))
    ctx = ctx_for("rmsnorm", backend="cuda", profile=prof)
    props = all_proposals(ctx)
    by_kind = {p.change.kind: p for p in props}
    for p in props:
        assert_valid(p, ctx)
    assert by_kind["flags:maxrregcount"].change.flags == ["-O3", "-maxrregcount=64"]
    assert "96 registers" in by_kind["flags:maxrregcount"].bottleneck
    assert {"ldg", "grid_stride", "launch_bounds"} <= set(by_kind)
    # the block size: one step, down here because occupancy is low; proposed once the
    # loop specialist's better-scored moves were tried
    ctx.recent = [IterationNote(iteration=1, author="loop", kind=k, outcome="same")
                  for k in ("grid_stride", "unroll")]
    knob = next(p for p in get_specialist("loop").propose(ctx) if p.change.kind == "knob:BLOCK")
    assert knob.change.knobs == {"BLOCK": 128} and "33% theoretical occupancy" in knob.bottleneck
    assert_valid(knob, ctx)


def test_revise_falls_back_to_something_more_conservative():
    ctx = ctx_for("add_gelu_muladd")
    mem, flags = get_specialist("memory_access"), get_specialist("compiler_flags")
    fusion = next(p for p in mem.propose(ctx) if p.change.kind == "fusion")
    # a merged candidate that failed: keep only this specialist's own part
    merged = fusion.model_copy(update={"change": fusion.change.model_copy(update={
        "kind": "fusion+omp_parallel",
        "kernel": apply_transform("omp_parallel", fusion.change.kernel)})})
    ctx.feedback = Feedback(kind="compile-error", message="line 12: error: boom")
    again = mem.revise(ctx, merged)
    assert again is not None and again.change.kernel == fusion.change.kernel
    assert again.change.kind == "fusion" and "Revised after 'line 12: error: boom'" in again.plan
    # flags: retry without -march=native
    fl = next(p for p in flags.propose(ctx) if p.change.kind == "flags")
    retry = flags.revise(ctx, fl)
    assert retry is not None and "-march=native" not in retry.change.flags
    assert "-O3" in retry.change.flags
    # nothing safer to try
    tile = Proposal(author="memory_access", bottleneck="b", plan="p", risks="r",
                    expected_gain=2.0, confidence=0.5,
                    change=fusion.change.model_copy(update={"kind": "interchange",
                                                            "transform": "interchange"}))
    assert mem.revise(ctx, tile) is None
    assert "Next:" in mem.plan(ctx)


def test_coordinator_merges_the_specialists_proposals(small_ops, tmp_path):
    """The lead's coordinator replays each proposal with apply_change: the first iteration's
    merged candidate for small_matmul carries the interchange, threads, simd and flags
    together, and is correct."""
    ctx = ctx_for("small_matmul")
    props = all_proposals(ctx)
    decision = coordinate(props, ctx.kernel, apply=lambda p, t: apply_change(p.change, t))
    merged = decision.candidates[0]
    assert {"interchange", "simd", "omp_parallel", "flags"} <= set(
        merged.change.kind.split("+"))
    kf = parse_any(merged.change.kernel)
    assert "const float a_q = ap[i * k + q];" in kf.body
    # zeroing + update loop, threaded and serial versions (not the short-row path)
    assert kf.body.count("#pragma omp simd") == 4
    assert "-fopenmp" in kf.meta.flags and "-march=native" in kf.meta.flags
    path = tmp_path / "merged.cpp"
    path.write_text(merged.change.kernel)
    assert check(str(small_ops("small_matmul")), str(path), "cpu", bench=QUICK).correct


class Echo:
    """A user's specialist: proposes nothing, never revises."""

    name = "echo"
    field = "says nothing"

    def propose(self, ctx):
        return []

    def revise(self, ctx, failed):
        return None


def test_registry_finds_a_registered_specialist():
    assert specialist_names("heuristic")[:3] == BUILTIN
    register_specialist("echo", Echo)
    try:
        assert "echo" in specialist_names("heuristic")
        sp = get_specialist("echo", "heuristic")
        assert isinstance(sp, Echo) and get_specialist("echo") is sp  # one instance
        assert isinstance(sp, registry.Specialist)
        with pytest.raises(SpecialistNotFound, match="no specialist 'echo' for policy 'llm'"):
            get_specialist("echo", "llm")
    finally:
        unregister_specialist("echo")
    register_specialist("echo", Echo(), policy="any")
    try:
        assert "echo" in specialist_names("llm") and "echo" in specialist_names("heuristic")
    finally:
        unregister_specialist("echo", policy="any")
    assert "echo" not in specialist_names("heuristic")


def test_registry_reads_the_entry_point_group_lazily(monkeypatch):
    eps = [importlib.metadata.EntryPoint(name="llm:echo2", value="tests.agents.test_specialists:"
                                         "Echo", group=registry.ENTRY_POINT_GROUP)]
    real = importlib.metadata.entry_points
    monkeypatch.setattr(importlib.metadata, "entry_points",
                        lambda **kw: eps if kw.get("group") == registry.ENTRY_POINT_GROUP
                        else real(**kw))
    monkeypatch.setattr(registry, "_entry_points_read", False)
    monkeypatch.setattr(registry, "_registry", {p: dict(v) for p, v in
                                                registry._registry.items()})
    assert "echo2" in specialist_names("llm")
    assert "echo2" not in specialist_names("heuristic")
    assert isinstance(get_specialist("echo2", "llm"), Echo)


def test_block_knob_search_is_monotone_and_bounded():
    base = baseline_text("transpose", "cuda")  # BLOCK: 256, no profile: step up
    loop = get_specialist("loop")

    def knob_moves(text, recent=()):
        ctx = ctx_for("transpose", kernel=text, backend="cuda", recent=list(recent))
        ctx.recent += [IterationNote(iteration=0, author="loop", kind=k, outcome="same")
                       for k in ("grid_stride", "launch_bounds", "unroll")]
        return [p.change.knobs for p in loop.propose(ctx) if p.change.kind == "knob:BLOCK"]

    assert knob_moves(base) == [{"BLOCK": 512}]
    at512 = apply_transform("knobs", base, {"values": {"BLOCK": 512}})
    step = IterationNote(iteration=1, author="loop", kind="knob:BLOCK", outcome="accepted")
    assert knob_moves(at512, [step]) == []  # no way back down without new evidence
    at128 = apply_transform("knobs", base, {"values": {"BLOCK": 128}})
    assert knob_moves(at128, [step, step]) == []  # two accepted steps: done


def test_knobs_of_unknown_effect_get_a_ladder_that_continues_after_a_win_and_stops_after_a_loss():
    from kernelcrew.evals.peers import tunable_path

    base = tunable_path("scale_shift_sum").read_text()  # knobs ACC 1, THREADS 1, CHUNK 1
    loop = get_specialist("loop")

    def knob_moves(text, recent=()):
        ctx = ctx_for("scale_shift_sum", kernel=text, recent=list(recent))
        return sorted((p.change.kind, tuple(p.change.knobs.items()))
                      for p in loop.propose(ctx) if p.change.type == "knobs")

    moves = knob_moves(base)
    # ACC (accumulators, unroll-like): x2 and x4; THREADS: up to the cores only
    assert ("knob:ACC", (("ACC", 2),)) in moves and ("knob:ACC", (("ACC", 4),)) in moves
    assert all(v <= (os.cpu_count() or 1) for k, ((_, v),) in moves if k == "knob:THREADS")
    # CHUNK (effect unknown): x2 and x8; seen once ACC and THREADS are at their ends (a
    # specialist proposes three kinds of change at most)
    ends = apply_transform("knobs", base, {"values": {"ACC": 16, "THREADS": 256}})
    chunk = [m for m in knob_moves(ends) if m[0] == "knob:CHUNK"]
    assert chunk == [("knob:CHUNK", (("CHUNK", 2),)), ("knob:CHUNK", (("CHUNK", 8),))]
    # the x4 rung won (the x2 rung was outdone in the same iteration): the ladder goes on
    at4 = apply_transform("knobs", base, {"values": {"ACC": 4}})
    won = [IterationNote(iteration=1, author="loop", kind="knob:ACC", outcome="accepted"),
           IterationNote(iteration=1, author="loop", kind="knob:ACC", outcome="faster-not-best")]
    assert {v for k, ((_, v),) in knob_moves(at4, won) if k == "knob:ACC"} == {8, 16}
    # the next step lost: the knob is left where it is
    lost = won + [IterationNote(iteration=2, author="loop", kind="knob:ACC", outcome="same")]
    assert not [m for m in knob_moves(at4, lost) if m[0] == "knob:ACC"]
