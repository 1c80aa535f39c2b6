"""The toolchain as part of the search: a kernel file may name its compiler (g++ by
default, clang++, clang++ with Polly), each with its own flag allow-list; the CPU backend
builds with it against GCC's libgomp only; the `compiler` move and the flags specialist
race the compilers like any other change; a missing compiler is skipped with a note."""

from __future__ import annotations

import shutil

import pytest

from kernelcrew.agents.coordinator import coordinate
from kernelcrew.agents.heuristic.compiler_flags import CompilerFlags
from kernelcrew.agents.proposal import Change, Proposal
from kernelcrew.agents.transforms import (
    apply_change,
    apply_transform,
    changed_regions,
    not_applicable,
)
from kernelcrew.errors import InputError, PolicyViolation
from kernelcrew.kernels import flags as flagmod
from kernelcrew.kernels.flags import check_flags, find_compiler, has_polly
from kernelcrew.kernels.kernelfile import parse_kernel_text
from kernelcrew.kernels.spec import load_op
from kernelcrew.tools.backends.cpu import CpuBackend, compiler_argv
from kernelcrew.tools.backends.symbols import undefined_symbols
from kernelcrew.tools.judge.check import check
from tests.agents.conftest import QUICK, baseline_text
from tests.agents.test_specialists import ctx_for

CLANG = find_compiler("clang++")
# clang and Polly are optional system tools: these tests carry the `tools` marker, which
# `make test` leaves out and `make test-tools` (CI installs them) runs
_polly = pytest.mark.skipif(CLANG is None or not has_polly(CLANG),
                            reason="clang++ with Polly is not installed here")


def needs_clang(f):
    return pytest.mark.tools(pytest.mark.skipif(CLANG is None,
                                                reason="clang++ is not installed here")(f))


def needs_polly(f):
    return pytest.mark.tools(_polly(f))


THREADED = """/* kernelcrew
entry: f
compiler: clang++
flags: [-O3, -march=native, -fopenmp]
*/
#include <cstdint>
extern "C" void f(const float* x, float* y, int64_t n) {
#pragma omp parallel for
    for (int64_t i = 0; i < n; i++) y[i] = 2.0f * x[i];
}
"""


def test_a_kernel_file_names_its_compiler():
    kf = parse_kernel_text(THREADED, "cpu")
    assert kf.meta.compiler == "clang++"
    # what clang++ is given: GCC's runtime only, so the threading pragmas build serial
    assert kf.build_line() == "clang++ -O3 -march=native -fopenmp-simd -Wno-register"
    back = kf.with_changes(compiler="g++")
    assert back.meta.compiler is None and "compiler:" not in back.text
    assert back.build_line().startswith("g++ ")
    assert parse_kernel_text(THREADED.replace("clang++", "clang++-19"), "cpu").meta.compiler \
        == "clang++-19"


@pytest.mark.parametrize("text, field, says", [
    (THREADED.replace("compiler: clang++", "compiler: icc"), "compiler", "clang++"),
    (THREADED.replace("-fopenmp]", "-fopenmp, -fvect-cost-model=cheap]"), "flags",
     "g++'s list: remove `compiler:`"),
    (THREADED.replace("compiler: clang++\n", "").replace("-fopenmp]", "-mllvm=-polly]"),
     "flags", "add `compiler: clang++`"),
    (THREADED.replace("-fopenmp]", "-mllvm, -polly]"), "flags", "allow-list"),
    (THREADED.replace("-fopenmp]", "-mllvm=-debug-pass=Structure]"), "flags", "allow-list"),
    (THREADED.replace("-fopenmp]", "-mllvm=-polly-parallel]"), "flags", "needs -mllvm=-polly"),
])
def test_bad_compiler_fields_are_one_line_errors(text, field, says):
    with pytest.raises(InputError) as e:
        parse_kernel_text(text, "cpu")
    assert e.value.field == field and says in str(e.value)
    assert len(str(e.value).splitlines()) == 1


def test_each_compiler_has_its_own_allow_list():
    assert check_flags(["-O3", "-mllvm=-polly", "-mllvm=-polly-parallel"], "cpu",
                       compiler="clang++")
    assert check_flags(["-O3", "-fvect-cost-model=cheap"], "cpu")
    with pytest.raises(PolicyViolation):
        check_flags(["-O3", "--param=max-unroll-times=4"], "cpu", compiler="clang++")
    with pytest.raises(PolicyViolation):
        check_flags(["-mllvm=-polly"], "cpu")
    with pytest.raises(InputError):
        parse_kernel_text(THREADED.replace("/* kernelcrew\n", "/* kernelcrew\nlaunch: []\n")
                          .replace("entry: f\n", ""), "cuda")


def test_clang_builds_against_gccs_openmp_runtime_only():
    """`-fopenmp` reaches clang++ as `-fopenmp-simd` (LLVM's runtime never enters the
    worker); Polly's threads link GCC's libgomp."""
    _exe, flags = compiler_argv("clang++", ["-O3", "-fopenmp"])
    assert "-fopenmp" not in flags and "-fopenmp-simd" in flags and "-Wno-register" in flags
    _, flags = compiler_argv("clang++", ["-O3", "-mllvm=-polly", "-mllvm=-polly-parallel",
                                         "-fopenmp"])
    assert "-lgomp" in flags
    _, flags = compiler_argv(None, ["-O3", "-fopenmp"])
    assert "-fopenmp" in flags and "-fno-gnu-unique" in flags


@needs_clang
def test_a_clang_kernel_is_built_checked_and_judged(small_ops):
    """The real backend builds a clang++ kernel (its dynamic symbols pass the allow-list,
    no `__kmpc_*`), and the judge finds it correct."""
    op = small_ops("scale_shift_sum")
    base = baseline_text("scale_shift_sum", "cpu")
    kf = parse_kernel_text(base, "cpu").with_changes(
        compiler="clang++", flags=["-O3", "-march=native", "-fopenmp"])
    res = CpuBackend().compile(kf, load_op(op))
    assert res.ok, res.reason or res.log[-500:]
    assert not any(s.startswith("__kmpc_") for s in undefined_symbols(res.artifact))


@needs_clang
def test_the_judge_runs_a_clang_built_candidate(small_ops, tmp_path):
    base = baseline_text("scale_shift_sum", "cpu")
    new = apply_transform("compiler", base, {"cc": "clang++"})
    assert new is not None and "compiler: clang++" in new
    path = tmp_path / "clang.cpp"
    path.write_text(new)
    assert check(str(small_ops("scale_shift_sum")), str(path), "cpu", bench=QUICK).correct


@needs_polly
def test_polly_threads_on_libgomp(small_ops, tmp_path):
    base = baseline_text("small_matmul", "cpu")
    new = apply_transform("compiler", base, {"cc": "clang++", "polly": True})
    assert new is not None and "-mllvm=-polly-parallel" in new
    path = tmp_path / "polly.cpp"
    path.write_text(new)
    res = CpuBackend().compile(parse_kernel_text(new, "cpu"), load_op("small_matmul"))
    assert res.ok, res.reason
    assert all(not s.startswith("__kmpc_") for s in undefined_symbols(res.artifact))
    assert check(str(small_ops("small_matmul")), str(path), "cpu", bench=QUICK).correct


@needs_clang
def test_clang_alone_is_not_offered_where_it_would_drop_the_threads():
    kf_text = THREADED.replace("compiler: clang++\n", "")
    assert apply_transform("compiler", kf_text, {"cc": "clang++"}) is None
    if has_polly(CLANG):
        assert apply_transform("compiler", kf_text, {"cc": "clang++", "polly": True})


def test_a_missing_compiler_is_skipped_with_a_note(monkeypatch, small_ops):
    """No clang++ on the PATH: the move does not apply and says why, the specialist does
    not propose it, and a kernel file that names it fails to build with the reason (it
    never crashes the run)."""
    real = shutil.which
    monkeypatch.setattr(flagmod.shutil, "which",
                        lambda name, *a, **k: None if "clang" in name else real(name, *a, **k))
    base = baseline_text("scale_shift_sum", "cpu")
    assert apply_transform("compiler", base, {"cc": "clang++"}) is None
    why = not_applicable(base)["compiler"]
    assert "clang++ is not installed" in why and "apt-get install clang" in why
    props = CompilerFlags().propose(ctx_for("scale_shift_sum"))
    assert props and not any(p.change.transform == "compiler" for p in props)
    kf = parse_kernel_text(base, "cpu").with_changes(compiler="clang++", flags=["-O3"])
    res = CpuBackend().compile(kf, load_op(small_ops("scale_shift_sum")))
    assert not res.ok and "not installed" in res.reason


@needs_clang
def test_a_compiler_rung_is_raced_on_the_merged_kernel():
    """The coordinator builds the iteration's merge again with the other compiler, beside
    it, instead of letting the compiler change ride inside the merge."""
    ctx = ctx_for("small_matmul")
    base = ctx.kernel

    def prop(author, kind, transform, params, gain, conf, typ="source"):
        new = apply_transform(transform, base, params)
        assert new is not None, transform
        return Proposal(author=author, bottleneck="b", plan=kind, risks="r",
                        expected_gain=gain, confidence=conf,
                        change=Change(type=typ, kind=kind, kernel=new, transform=transform,
                                      params=params, regions=changed_regions(base, new),
                                      flags=parse_kernel_text(new, "cpu").meta.flags
                                      if typ == "flags" else None))
    props = [prop("memory_access", "interchange", "interchange", {}, 3.0, 0.8),
             prop("loop", "simd", "simd", {}, 2.2, 0.75),
             prop("compiler_flags", "compiler:clang++", "compiler", {"cc": "clang++"}, 1.1,
                  0.3, "flags")]
    d = coordinate(props, base, apply=lambda p, t: apply_change(p.change, t))
    merged, rung = d.candidates[0], d.candidates[1]
    assert merged.change.kind == "interchange+simd"
    assert rung.change.kind == "interchange+simd+compiler:clang++"
    assert "compiler: clang++" not in merged.change.kernel
    assert "compiler: clang++" in rung.change.kernel
    # the same code as the merge, the other compiler
    assert rung.change.kernel.split("*/", 1)[1] == merged.change.kernel.split("*/", 1)[1]
    # without a merge, the rung builds the chosen change's kernel, not the bare base
    d = coordinate(props[::2], base, apply=lambda p, t: apply_change(p.change, t))
    assert [c.change.kind for c in d.candidates] == ["interchange",
                                                     "interchange+compiler:clang++"]
    assert "compiler: clang++" in d.candidates[1].change.kernel
    assert d.candidates[1].change.kernel.split("*/", 1)[1] == \
        props[0].change.kernel.split("*/", 1)[1]


def test_a_rung_whose_merge_did_not_compile_is_proposed_again_once():
    from kernelcrew.agents.heuristic.compiler_flags import raced_rungs

    # raced in a merge that ran: not again; in a merge the compiler failed on: once more
    assert "compiler:clang++" in raced_rungs({"simd+compiler:clang++": "same"})
    failed_once = {"simd+omp_parallel+compiler:polly": "compile-error", "simd": "accepted"}
    assert "compiler:polly" not in raced_rungs(failed_once)
    assert "simd" in raced_rungs(failed_once)
    failed_twice = {**failed_once, "flags+compiler:polly": "compile-error"}
    assert "compiler:polly" in raced_rungs(failed_twice)


@needs_clang
def test_a_rung_proposed_alone_is_raced_outside_the_merge():
    ctx = ctx_for("small_matmul")
    base = ctx.kernel

    def prop(author, kind, transform, params, typ="source"):
        new = apply_transform(transform, base, params)
        assert new is not None, transform
        return Proposal(author=author, bottleneck="b", plan=kind, risks="r",
                        expected_gain=2.0, confidence=0.7,
                        change=Change(type=typ, kind=kind, kernel=new, transform=transform,
                                      params=params, regions=changed_regions(base, new),
                                      flags=parse_kernel_text(new, "cpu").meta.flags
                                      if typ == "flags" else None))
    props = [prop("memory_access", "interchange", "interchange", {}),
             prop("loop", "simd", "simd", {}),
             prop("compiler_flags", "compiler:clang++", "compiler",
                  {"cc": "clang++", "alone": True}, "flags")]
    d = coordinate(props, base, apply=lambda p, t: apply_change(p.change, t))
    kinds = [c.change.kind for c in d.candidates]
    assert kinds[0] == "interchange+simd" and "compiler:clang++" in kinds
    alone = d.candidates[kinds.index("compiler:clang++")]
    assert alone.change.kernel.split("*/", 1)[1] == base.split("*/", 1)[1]  # the code as it is
