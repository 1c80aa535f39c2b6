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


def _note(kf, p):
    from kernelcrew.agents.transforms import Outcome

    if "// note" in kf.body:
        return None
    return Outcome(body=f"// note {p['text']} {kf.meta.flags}\n" + kf.body)


def test_a_whole_file_move_sees_the_front_matter_and_says_why_not() -> None:
    from kernelcrew.agents.transforms import describe, not_applicable

    register_transform("test_note", ("cpu",), "a note with the flags", _note, whole_file=True,
                       why_not="noted already", text="hi")
    try:
        base = load_op("scale_shift_sum").baseline_path("cpu").read_text()
        new = apply_transform("test_note", base)
        assert new is not None and "// note hi ['-O2']" in new
        assert "// note there" in apply_transform("test_note", base, {"text": "there"})
        assert not_applicable(new)["test_note"] == "noted already"
        listed = {d["name"]: d for d in describe(new)}
        assert listed["test_note"] == {"name": "test_note", "doc": "a note with the flags",
                                       "params": {"text": "hi"}, "why_not": "noted already"}
        # every CPU move is listed, in the catalogue's order, and no CUDA-only one
        assert [d["name"] for d in describe(base)] == \
            [n for n, t in TRANSFORMS.items() if "cpu" in t.backends]
        assert describe(base)[0]["name"] == "restrict" and "smem_tile" not in listed
        applies = {d["name"] for d in describe(base) if d["why_not"] is None}
        assert "omp_parallel" in applies and "flags" in applies  # settings always apply
    finally:
        TRANSFORMS.pop("test_note", None)
