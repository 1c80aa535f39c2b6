from __future__ import annotations

from datetime import datetime

import pytest
from pydantic import ValidationError

from kernelcrew.memory import Reflection


def test_id_depends_on_run_iteration_author_change_kind_and_candidate_only(
        make_reflection) -> None:
    a = make_reflection(text="first wording", speedup=1.1)
    b = make_reflection(text="second wording", speedup=2.0, accepted=False)
    assert a.id == b.id
    assert a.id != make_reflection(iteration=1).id
    assert a.id != make_reflection(author="other-agent").id
    assert a.id != make_reflection(change_kind="omp_parallel").id
    assert a.id != make_reflection(run_id="run-b").id
    # one author, one kind, two candidates in one iteration: two reflections
    one, two = make_reflection(candidate="c1.cpp"), make_reflection(candidate="c2.cpp")
    assert len({a.id, one.id, two.id}) == 3
    assert one.id == make_reflection(candidate="c1.cpp", text="other wording").id


def test_dump_and_validate_round_trip_including_derived_id(make_reflection) -> None:
    r = make_reflection()
    dumped = r.model_dump(mode="json")
    assert dumped["id"] == r.id
    assert isinstance(dumped["created"], str)
    assert Reflection.model_validate(dumped) == r


def test_metadata_round_trip(make_reflection) -> None:
    r = make_reflection(created=datetime.fromisoformat("2025-01-02T03:04:05+00:00"))
    meta = r.to_metadata()
    assert all(isinstance(v, (str, int, float, bool)) for v in meta.values())
    assert Reflection.from_metadata(r.text, meta) == r


def test_outcome_round_trips_and_records_without_one_read_back(make_reflection) -> None:
    r = make_reflection(accepted=False, speedup=1.4, outcome="faster-not-best")
    meta = r.to_metadata()
    assert meta["outcome"] == "faster-not-best" and meta["schema"] == 3
    back = Reflection.from_metadata(r.text, meta)
    assert back == r and back.verdict == "faster-not-best"
    # a record written before outcomes were stored (schema 1)
    old = {k: v for k, v in meta.items() if k != "outcome"} | {"schema": 1}
    assert Reflection.from_metadata(r.text, old).verdict == "not accepted"


def test_records_written_before_candidates_keep_their_ids(make_reflection) -> None:
    r = make_reflection(candidate="iter0-simd.cpp")
    meta = r.to_metadata()
    assert meta["candidate"] == "iter0-simd.cpp" and Reflection.from_metadata(r.text, meta) == r
    old = {k: v for k, v in meta.items() if k != "candidate"} | {"schema": 2}
    back = Reflection.from_metadata(r.text, old)
    assert back.candidate == "" and back.id == make_reflection().id


@pytest.mark.parametrize(
    "bad",
    [{"bottleneck": "io-bound"}, {"speedup": float("nan")}, {"speedup": -1.0}, {"text": " "}],
)
def test_invalid_fields_are_rejected(make_reflection, bad: dict) -> None:
    with pytest.raises(ValidationError):
        make_reflection(**bad)
