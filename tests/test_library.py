"""Every library baseline passes its own shape groups on the CPU, and each hand-written
fast kernel under tests/kernels/ is judged correct and faster: the harness sees wins."""

from __future__ import annotations

import pytest

from kernelcrew.kernels.spec import library_ops
from kernelcrew.tools.config import BenchSettings
from kernelcrew.tools.judge.check import check
from tests.conftest import ROOT

OPS = library_ops()
BENCH = BenchSettings(reps=10)


@pytest.mark.parametrize("op", OPS)
def test_library_baseline_is_correct_on_every_group(op):
    res = check(op, ROOT / "kernelcrew/kernels/library" / op / "baseline.cpp", "cpu",
                bench=BENCH)
    assert res.correct, res.reason
    assert {r.group for r in res.rows} == {"typical", "boundary", "unaligned"}
    assert all(r.status == "pass" for r in res.rows)
    assert res.verdict != "rejected"


@pytest.mark.parametrize("op", OPS)
def test_hand_written_fast_kernel_is_correct_and_faster(op):
    res = check(op, ROOT / "tests/kernels" / op / "fast.cpp", "cpu", bench=BENCH)
    assert res.correct, res.reason
    assert res.verdict == "faster", f"{res.speedup:.2f}x: {res.reason}"
