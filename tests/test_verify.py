"""The comparison with the float64 reference: tolerance, NaN/Inf positions, and the
errors and indices it reports, with and without non-finite elements."""

from __future__ import annotations

import numpy as np
import pytest

from kernelcrew.tools.judge.verify import compare


def test_within_tolerance_passes_with_the_largest_errors():
    ref = np.array([[1.0, -2.0], [0.0, 4.0]])
    got = np.array([[1.0001, -2.0], [1e-6, 4.0]], dtype=np.float32)
    c = compare("y", got, ref, 1e-3, 1e-5)
    g = got.astype(np.float64)
    assert c.ok and c.detail == "" and c.failing_indices == []
    assert c.max_abs_err == np.abs(g - ref).max()
    assert c.max_rel_err == pytest.approx(1e-6 / np.finfo(np.float64).tiny)
    assert np.array_equal(ref, [[1.0, -2.0], [0.0, 4.0]])  # the reference is left as it was


def test_outside_tolerance_names_count_worst_and_first_indices():
    ref = np.ones((3, 4))
    got = ref.astype(np.float32)
    got[0, 1], got[2, 3], got[1, 0] = 2.0, 6.0, 1.000001
    c = compare("y", got, ref, 1e-4, 1e-5)
    assert not c.ok
    assert c.failing_indices == [[0, 1], [2, 3]]
    assert c.detail.startswith("y: 2 of 12 elements outside tolerance (rtol=0.0001, atol=1e-05)")
    assert "worst at [2, 3]: got 6, expected 1" in c.detail
    assert (c.max_abs_err, c.max_rel_err) == (5.0, 5.0)


def test_non_finite_elements_must_match_and_are_left_out_of_the_errors():
    ref = np.array([np.nan, np.inf, 1.0, -np.inf, 2.0])
    got = np.array([np.nan, np.inf, 1.5, -np.inf, 2.0], dtype=np.float32)
    c = compare("y", got, ref, 1e-4, 1e-5)
    assert not c.ok and c.failing_indices == [[2]]
    assert c.detail.startswith("y: 1 of 2 elements outside tolerance")
    assert "worst at [2]: got 1.5, expected 1" in c.detail
    assert (c.max_abs_err, c.max_rel_err) == (0.5, 0.5)
    got[2] = 1.0
    assert compare("y", got, ref, 1e-4, 1e-5).ok
    got[4] = np.nan  # an unwritten element where the reference is finite
    c = compare("y", got, ref, 1e-4, 1e-5)
    assert not c.ok and c.failing_indices == [[4]]
    assert "1 element(s) where NaN/Inf differ from the reference (1 NaN in the output" in c.detail


def test_nothing_finite_or_nothing_at_all_passes_and_a_wrong_shape_fails():
    assert compare("y", np.full(3, np.nan), np.full(3, np.nan), 0.0, 0.0).ok
    assert compare("y", np.zeros((0, 4)), np.zeros((0, 4)), 0.0, 0.0).ok
    c = compare("y", np.zeros(4), np.zeros((2, 2)), 1e-4, 1e-5)
    assert not c.ok and "shape (4,), reference (2, 2)" in c.detail


def test_an_eight_bit_output_that_is_rightly_the_poison_is_not_called_unwritten():
    """After the inputs changed, the reference of the unchanged inputs may differ from the
    right value where the right value is the poison byte itself (one time in 256): the
    element is judged against the reference of the inputs as they are, asked for only
    then. A poison byte where the right value is another is still an unwritten output."""
    from kernelcrew.kernels.spec import load_op
    from kernelcrew.tools.backends.buffers import poison_int
    from kernelcrew.tools.judge.harness import Harness

    case = next(iter(load_op("histogram").cases()))
    p = poison_int(np.dtype(np.uint8))
    got = {"dst": np.array([p], dtype=np.uint8)}  # one element: always the one sampled
    base = {"dst": np.array([7], dtype=np.uint8)}  # before the change: 7 there
    asked = []

    def now(value):
        def ref():
            asked.append(value)
            return {"dst": np.array([value], dtype=np.uint8)}
        return ref

    def judge(confirm):
        return Harness.unwritten(None, case, got, base, np.random.default_rng(0), "run 1",
                                 confirm)

    assert judge(now(p)) is None and asked == [p]  # the change made the poison right
    row = judge(now(9))
    assert row is not None and row.cause == "unwritten" and row.worst_index == [0]
    assert judge(None) is not None  # without a reference of the changed inputs, as before
    got["dst"][0] = 7
    asked.clear()
    assert judge(now(p)) is None and asked == []  # nothing looks unwritten: not asked
