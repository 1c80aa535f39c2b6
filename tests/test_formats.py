"""The formats: safe expressions, op specs, kernel files, flags."""

from __future__ import annotations

import pytest

from kernelcrew.errors import ExprError, InputError, PolicyViolation
from kernelcrew.kernels.expr import evaluate, names_in
from kernelcrew.kernels.flags import check_flags
from kernelcrew.kernels.kernelfile import parse_kernel_text
from kernelcrew.kernels.spec import library_ops, load_op


def test_expressions_evaluate_sizes_and_knobs():
    assert evaluate("ceil_div(n, BLOCK) * 2 + n % 7 - n // 3", {"n": 100, "BLOCK": 32}) == 8 + 2 - 33
    assert evaluate("max(min(a, 4), 2)", {"a": 9}) == 4
    assert names_in("ceil_div(rows*cols, B)") == {"rows", "cols", "B"}


@pytest.mark.parametrize("bad", ["__import__('os')", "n.real", "n ** 2", "open('x')", "1.5 * n",
                                 "[n]", "n if n else 1", "lambda: 1", "'a'"])
def test_expressions_refuse_everything_else(bad):
    with pytest.raises(ExprError):
        evaluate(bad, {"n": 3})


def test_every_library_op_loads_with_all_groups():
    ops = library_ops()
    assert len(ops) >= 6
    for name in ops:
        spec = load_op(name)
        assert {"typical", "boundary", "unaligned"} <= set(spec.shapes), name
        assert "cpu" in spec.baselines, name  # CUDA baselines: the first six ops so far
        for case in spec.cases():
            assert spec.cost_bytes(case.sizes) >= 0


def test_yaml_float_strings_are_accepted(op_copy):
    spec = load_op(op_copy("vadd"))  # writes rtol as 1e-5, which YAML reads as a string
    assert spec.tolerance.rtol == 1e-5


def test_flag_allow_list():
    assert check_flags(["-O3", "-march=native", "-fopenmp"], "cpu")
    for bad in ["-include/etc/passwd", "-o", "-B/tmp", "-fplugin=x.so", "@args", "-DX=1", "-L."]:
        with pytest.raises(PolicyViolation):
            check_flags([bad], "cpu")
    assert check_flags(["-O3", "-maxrregcount=64", "--use_fast_math"], "cuda")


def test_kernel_file_round_trip_keeps_body_and_changes_meta():
    text = "/* kernelcrew\nentry: f\nflags: [-O2]\nknobs: {U: 2}\n*/\nint x;\n"
    kf = parse_kernel_text(text, "cpu")
    kf2 = kf.with_changes(flags=["-O3"], knobs={"U": 4})
    assert kf2.meta.flags == ["-O3"] and kf2.meta.knobs == {"U": 4}
    assert kf2.body.strip() == "int x;" and kf2.meta.entry == "f"


def test_cpu_kernel_needs_entry():
    with pytest.raises(InputError, match="entry"):
        parse_kernel_text("/* kernelcrew\nflags: [-O2]\n*/\n", "cpu")
