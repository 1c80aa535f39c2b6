"""The catalogue as the LLM crew's tools: moves listed with their docs and why the others do
not apply, moves named with parameters applied and legality-checked by the catalogue
itself (a refusal with its reason), proposals that merge and replay like heuristic ones,
and the answer forms a small model can write (moves, edits, a fenced kernel, one call)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernelcrew.agents.coordinator import coordinate
from kernelcrew.agents.llm import make_specialist
from kernelcrew.agents.llm.answers import apply_edits, complete_front_matter, read_text_answer
from kernelcrew.agents.llm.moves import apply_moves, catalogue, check_params
from kernelcrew.agents.transforms import apply_change, apply_transform
from kernelcrew.graph.agent_view import move_options
from tests.llm.conftest import settings_for
from tests.llm.scripted_server import answer, raw
from tests.llm.scripts import PLAN, vadd_context

HERE = Path(__file__).resolve().parent
EXPMUL = (HERE / "ops" / "expmul" / "baseline.cpp").read_text()
SCAN = """/* kernelcrew
entry: scan
flags: [-O2]
*/
#include <cstdint>
extern "C" void scan(const float* x, float* y, int64_t n) {
  float acc = 0.0f;
  for (int64_t i = 0; i < n; ++i) { acc += x[i]; y[i] = acc; }
}
"""


def expmul_context(**over):
    over.setdefault("moves", move_options(EXPMUL, "cpu"))
    return vadd_context(op="expmul", description="y = exp(x) * g",
                        signature="x (input), g (input), y (output), n (size)",
                        kernel=EXPMUL, profile=None,
                        entry_params=[{"name": "x", "kind": "input", "dtype": "float32"},
                                      {"name": "g", "kind": "input", "dtype": "float32"},
                                      {"name": "y", "kind": "output", "dtype": "float32"},
                                      {"name": "n", "kind": "size", "dtype": "int64"}],
                        **over)


def test_the_catalogue_lists_each_move_with_its_doc_or_why_it_does_not_apply():
    docs = {d.name: d for d in catalogue(SCAN, "cpu")}
    assert "sequence" not in docs  # the chain composer: the model names moves one by one
    assert docs["unroll"].applies and docs["unroll"].params == {"factor": 4}
    assert "unroll pragmas" in docs["unroll"].doc
    # a loop-carried running sum: threading is illegal, and the catalogue says why
    assert not docs["omp_parallel"].applies and docs["omp_parallel"].why_not
    assert not docs["vector_math"].applies and "exp" in docs["vector_math"].why_not
    # the ones that apply come first
    flags = [d.applies for d in catalogue(SCAN, "cpu")]
    assert flags == sorted(flags, reverse=True)
    assert {d.name for d in catalogue(SCAN, "cuda")} >= {"ldg", "grid_stride"}


def test_a_named_move_is_applied_by_the_same_code_the_heuristic_crew_uses():
    got = apply_moves(EXPMUL, [("vector_math", {}), ("unroll", {"factor": 8})], "cpu")
    assert got.refused == "" and got.kernel is not None
    want = apply_transform("unroll", apply_transform("vector_math", EXPMUL), {"factor": 8})
    assert got.kernel == want
    # replayable: the first move and the rest as its `then` chain, what apply_change runs
    assert got.transform == "vector_math"
    assert got.params == {"then": [["unroll", {"factor": 8}]]}
    assert got.kind == "vector_math+unroll"
    assert apply_transform(got.transform, EXPMUL, got.params) == got.kernel


def test_an_illegal_move_is_refused_with_the_catalogues_reason():
    got = apply_moves(SCAN, [("omp_parallel", {})], "cpu")
    assert got.kernel is None
    assert got.refused.startswith("move omp_parallel does not apply: ")
    assert catalogue(SCAN, "cpu")[0].name  # listing and refusal read the same analysis
    why = {d.name: d.why_not for d in catalogue(SCAN, "cpu")}["omp_parallel"]
    assert why in got.refused


@pytest.mark.parametrize("calls, says", [
    ([("tile_magic", {})], "there is no move named 'tile_magic'; the moves for cpu:"),
    ([("ldg", {})], "move ldg is for cuda only"),
    ([("unroll", {"ways": 2})], "move unroll has no parameter 'ways'; its parameters: factor"),
    ([("unroll", {"factor": "eight"})], "parameter factor='eight' is not a int"),
    ([("flags", {"add": ["-funsafe-everything"]})], "not on the allow-list"),
    ([("restrict", {})] * 5, "at most 4 moves"),
])
def test_bad_moves_are_refused_with_a_reason_the_model_can_act_on(calls, says):
    got = apply_moves(EXPMUL, calls, "cpu")
    assert got.kernel is None and says in got.refused


def test_parameters_are_coerced_to_the_defaults_types():
    assert check_params("unroll", {"factor": "8"}) == ({"factor": 8}, "")
    assert check_params("flags", {"add": "-O3 -march=native"})[0] == {
        "add": ["-O3", "-march=native"]}


def test_a_proposal_of_moves_only_merges_and_replays_like_a_heuristic_one(serve, tmp_path):
    srv = serve({("loop", "plan"): [answer({**PLAN, "kind": "vector_math"})],
                 ("loop", "code"): [answer({"moves": [{"move": "vector_math"}],
                                            "expected_gain": 9.0, "confidence": 1.0})],
                 ("compiler_flags", "plan"): [answer({**PLAN, "kind": "flags"})],
                 ("compiler_flags", "code"): [answer({"moves": [
                     {"move": "unroll", "params": {"factor": 8}}]})]})
    ctx = expmul_context(run_dir=str(tmp_path))
    loop = make_specialist("loop", settings=settings_for(srv), run_dir=str(tmp_path))
    flags = make_specialist("compiler_flags", settings=settings_for(srv), run_dir=str(tmp_path))
    (a,) = loop.propose(ctx)
    (b,) = flags.propose(ctx)
    assert a.change.transform == "vector_math" and a.change.kind == "vector_math"
    assert a.change.kernel == apply_transform("vector_math", EXPMUL)
    assert a.estimate == "model"  # its 9x is the model's claim
    assert b.change.transform == "unroll" and b.change.params == {"factor": 8}
    # replay on another base, and the coordinator's merge of the two
    assert apply_change(a.change, b.change.kernel) is not None
    d = coordinate([a, b], EXPMUL, apply=lambda p, t: apply_change(p.change, t))
    assert d.candidates[0].change.kind in ("vector_math+unroll", "unroll+vector_math")
    # the answers were recorded as moves
    assert loop.last_answers[-1]["form"] == flags.last_answers[-1]["form"] == "moves"


def test_a_refused_move_goes_back_with_the_reason_then_another_is_named(serve, tmp_path):
    srv = serve({("loop", "plan"): [answer(PLAN)],
                 ("loop", "code"): [answer({"moves": [{"move": "blocked_scan"}]}),
                                    answer({"moves": [{"move": "vector_math"}]})]})
    a = make_specialist("loop", settings=settings_for(srv), run_dir=str(tmp_path))
    (p,) = a.propose(expmul_context(run_dir=str(tmp_path)))
    repair = srv.calls("loop", "code")[1].user
    assert "move blocked_scan does not apply: " in repair
    assert "Moves that apply now: " in repair and "vector_math" in repair
    assert p.change.transform == "vector_math"
    assert [(x["kind"], x.get("form")) for x in a.last_answers] == [
        ("usable", None), ("move_refused", None), ("usable", "moves")]


def test_the_context_lists_the_moves_that_apply_and_why_others_do_not(serve, tmp_path):
    srv = serve({("loop", "plan"): [answer(PLAN)],
                 ("loop", "code"): [answer({"moves": [{"move": "vector_math"}]})]})
    make_specialist("loop", settings=settings_for(srv), run_dir=str(tmp_path)).propose(
        expmul_context(run_dir=str(tmp_path)))
    user = srv.exchanges[0].user
    assert "## Moves of the catalogue that apply to the current best" in user
    assert "- vector_math: float exp/erf calls in loops" in user
    assert "- unroll(factor=4): unroll pragmas on innermost loops" in user
    assert "## Moves that do not apply here, and why" in user
    assert "- blocked_scan: " in user


TEXT = {"methods": "text", "structured_output": "text"}


@pytest.mark.parametrize("reply, form", [
    ("I would vectorize the exp.\nMOVE: vector_math\nGAIN: 3", "moves"),
    ("vector_math", "moves"),  # a small model's bare choice among the moves offered
    (("<<<<<<< SEARCH\n  for (int64_t i = 0; i < n; ++i) y[i] = std::exp(x[i]) * g[i];\n"
     "=======\n#pragma GCC unroll 4\n  for (int64_t i = 0; i < n; ++i) y[i] = std::exp(x[i]) "
     "* g[i];\n>>>>>>> REPLACE"), "edits"),
    (("Here:\n```cpp\n#include <cmath>\n#include <cstdint>\nextern \"C\" void expmul(const "
     "float* __restrict__ x, const float* __restrict__ g, float* __restrict__ y, int64_t n) {"
     "\n  for (int64_t i = 0; i < n; ++i) y[i] = std::exp(x[i]) * g[i];\n}\n```"), "kernel"),
])
def test_plain_text_answers_a_small_model_can_write(serve, tmp_path, reply, form):
    srv = serve({("loop", "plan"): [answer(PLAN)], ("loop", "code"): [raw(reply)]})
    a = make_specialist("loop", settings=settings_for(srv, **TEXT), run_dir=str(tmp_path))
    (p,) = a.propose(expmul_context(run_dir=str(tmp_path)))
    assert a.last_answers[-1]["form"] == form
    code = srv.calls("loop", "code")[0]
    assert "Reply in plain text, not JSON" in code.system  # no JSON schema to escape into
    assert '"title":"CodeAnswer"' not in code.system
    assert p.change.kernel.startswith("/* kernelcrew\nentry: expmul\n")
    if form == "kernel":  # the crew filled in the front matter: the best's entry and flags
        assert "-march=native" in p.change.kernel.split("*/")[0]
        assert "__restrict__" in p.change.kernel


def test_one_call_makes_plan_and_change_in_one_answer(serve, tmp_path):
    srv = serve({("loop", "propose"): [raw(
        "BOTTLENECK: a libm exp per element, scalar.\nPLAN: inline a vectorizable exp.\n"
        "KIND: vector_math\nGAIN: 3\nMOVE: vector_math")]})
    a = make_specialist("loop", settings=settings_for(srv, one_call=True, **TEXT),
                        run_dir=str(tmp_path))
    (p,) = a.propose(expmul_context(run_dir=str(tmp_path)))
    assert [e.step for e in srv.exchanges] == ["propose"]
    assert p.plan == "inline a vectorizable exp." and p.change.transform == "vector_math"
    assert p.bottleneck == "a libm exp per element, scalar."
    assert "BOTTLENECK:" in srv.exchanges[0].system  # the one-call text form


def test_edits_and_front_matter_completion():
    text, why = apply_edits(EXPMUL, [{"search": "y[i] = std::exp(x[i]) * g[i];",
                                      "replace": "y[i] = g[i] * std::exp(x[i]);"}])
    assert why == "" and "g[i] * std::exp" in text
    # indentation differs: found line by line
    text, why = apply_edits(EXPMUL, [{"search": "for (int64_t i = 0; i < n; ++i) y[i] = "
                                                "std::exp(x[i]) * g[i];",
                                      "replace": "  // gone"}])
    assert why == "" and "// gone" in text
    _, why = apply_edits(EXPMUL, [{"search": "nowhere();", "replace": ""}])
    assert "is not in the current kernel" in why
    _, why = apply_edits(EXPMUL, [{"search": "#include", "replace": ""}])
    assert "occurs 2 times" in why
    # a front matter written after the includes moves to the top; a missing entry is added
    late = "#include <cstdint>\n/* kernelcrew\nflags: [-O2]\n*/\nextern \"C\" void expmul() {}\n"
    done = complete_front_matter(late, EXPMUL, "cpu")
    assert done.startswith("/* kernelcrew\nentry: expmul\n") and "-O2" in done.split("*/")[0]
    assert read_text_answer("nothing to see") is None


def test_a_move_whose_result_was_evaluated_is_marked_and_not_offered_again():
    from kernelcrew.agents.llm.specialists import offered_moves
    from kernelcrew.kernels.kernelfile import text_digest

    done = {text_digest(apply_transform("vector_math", EXPMUL)): "slower"}
    ctx = expmul_context(moves=move_options(EXPMUL, "cpu", done))
    vm = next(m for m in ctx.moves if m.name == "vector_math")
    assert vm.tried == "slower" and "[tried on this kernel: slower]" in vm.line()
    assert "vector_math" not in offered_moves(ctx) and "simd" in offered_moves(ctx)


def test_the_compact_setting_sends_a_short_prompt_for_small_models(serve, tmp_path):
    echo = ("<<SYS>>\n- vector_math: float exp/erf calls in loops -> inline vectorizable\n"
            "- omp_parallel(min_work=1048576): #pragma omp parallel for\n")
    srv = serve({("loop", "propose"): [raw(echo)]})
    a = make_specialist("loop", settings=settings_for(
        srv, one_call=True, compact=True, context_budget=300, **TEXT), run_dir=str(tmp_path))
    (p,) = a.propose(expmul_context(run_dir=str(tmp_path)))
    (call,) = srv.exchanges
    assert "You are the kernelcrew loop specialist" in call.system
    assert "Rules for every kernelcrew agent" not in call.system
    assert "MOVE: <name>" in call.system and len(call.system) < 1000
    # the moves that apply now close the prompt (`compiler` too where a clang++ is installed)
    offered = call.user.rstrip().rsplit("\n", 1)[-1].rstrip(".").split(", ")
    assert offered[:5] == ["restrict", "omp_parallel", "simd", "unroll", "vector_math"]
    assert set(offered[5:]) <= {"compiler"}
    # an echo of the list picks its first line's move
    assert p.change.transform == "vector_math"


@pytest.mark.parametrize("text, picked", [
    ("- simd: pragma\n- unroll: pragmas", "simd"),
    ("simd or unroll, I am not sure", None),  # a line naming several is no choice
    ("nothing here\nrestrict", "restrict"),
    ("I would not use vector_mathematics", None),
])
def test_a_bare_answer_picks_the_first_line_naming_one_move(text, picked):
    got = read_text_answer(text, ["vector_math", "simd", "unroll", "restrict"])
    assert (got["moves"][0]["move"] if got else None) == picked
