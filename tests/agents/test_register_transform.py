"""A transform registered from outside the package is applied and replayed like a built-in."""

from __future__ import annotations

import pytest

from kernelcrew.agents.proposal import Change
from kernelcrew.agents.transforms import (
    TRANSFORMS,
    apply_change,
    apply_transform,
    register_transform,
)
from kernelcrew.kernels.spec import load_op


def _mark(body: str, entry: str) -> str | None:
    return None if "// marked" in body else f"// marked {entry}\n" + body


def test_a_registered_body_transform_applies_and_replays() -> None:
    register_transform("test_mark", ("cpu",), "a comment per entry", _mark)
    try:
        base = load_op("scale_shift_sum").baseline_path("cpu").read_text()
        new = apply_transform("test_mark", base)
        assert new is not None and "// marked scale_shift_sum" in new
        assert apply_transform("test_mark", new) is None  # does not apply twice
        change = Change(type="source", kind="test_mark", transform="test_mark", kernel=new)
        assert apply_change(change, base) == new
        with pytest.raises(ValueError, match="already registered"):
            register_transform("test_mark", ("cpu",), "again", _mark)
    finally:
        TRANSFORMS.pop("test_mark", None)


def _mark_n(body: str, entry: str, times: int) -> str | None:
    return None if "// marked" in body else f"// marked {entry}\n" * times + body


def test_a_registered_transform_with_parameters_gets_them_typed() -> None:
    register_transform("test_mark_n", ("cpu",), "n comments per entry", _mark_n, times=1)
    try:
        assert TRANSFORMS["test_mark_n"].params == {"times": 1}
        base = load_op("scale_shift_sum").baseline_path("cpu").read_text()
        once = apply_transform("test_mark_n", base)
        assert once is not None and once.count("// marked scale_shift_sum") == 1
        thrice = apply_transform("test_mark_n", base, {"times": "3"})  # converted to int
        assert thrice is not None and thrice.count("// marked scale_shift_sum") == 3
        change = Change(type="source", kind="test_mark_n", transform="test_mark_n",
                        params={"times": 3.0}, kernel=thrice)
        assert apply_change(change, base) == thrice
    finally:
        TRANSFORMS.pop("test_mark_n", None)
