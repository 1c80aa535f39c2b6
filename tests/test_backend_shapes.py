"""op.yaml `backend_shapes`: shape groups of one backend only. A backend's group replaces
the shared group of the same name or adds one; other backends (and every caller that names
no backend) see op.yaml's `shapes:` exactly as written."""

from __future__ import annotations

import pytest
import yaml

from kernelcrew.errors import InputError
from kernelcrew.kernels.spec import load_op

CUDA_BLOCK = {"cuda": {"typical": {"weight": 1.0, "cases": [{"n": 64}]},
                       "huge": {"weight": 0.5, "cases": [{"n": 128}, {"n": 256}]}}}


def _with(folder, backend_shapes) -> None:
    y = folder / "op.yaml"
    data = yaml.safe_load(y.read_text())
    data["backend_shapes"] = backend_shapes
    y.write_text(yaml.safe_dump(data, sort_keys=False))


def test_a_backend_group_replaces_or_adds_and_others_see_the_shared_ones(op_copy):
    folder = op_copy("vadd")
    shared = load_op(folder).shapes
    _with(folder, CUDA_BLOCK)
    spec = load_op(folder)
    assert spec.shapes == shared and spec.shapes_backend is None
    assert spec.for_backend("cpu") is spec and load_op(folder, "cpu").shapes == shared
    cuda = load_op(folder, "cuda")
    assert cuda.shapes_backend == "cuda"
    assert list(cuda.shapes) == [*shared, "huge"]  # order: shared groups, then new ones
    assert cuda.shapes["typical"].cases == [{"n": 64}]
    assert {g: cuda.shapes[g] for g in shared if g != "typical"} == \
        {g: s for g, s in shared.items() if g != "typical"}
    assert [c.group for c in cuda.cases()].count("huge") == 2
    # idempotent, and reversible: the CUDA spec asked for the CPU gives the shared groups
    assert cuda.for_backend("cuda") is cuda and load_op(cuda, "cuda") is cuda
    assert cuda.for_backend("cpu").shapes == shared
    assert cuda.for_backend(None).shapes == shared
    assert cuda.for_backend("cpu").for_backend("cuda").shapes == cuda.shapes


def test_a_backend_without_its_own_groups_gets_the_spec_itself(op_copy):
    folder = op_copy("vadd")
    spec = load_op(folder)
    assert spec.for_backend("cuda") is spec and spec.for_backend("cpu") is spec


@pytest.mark.parametrize(("block", "words"), [
    ({"cuda": {"typical": {"weight": 1.0, "cases": [{"m": 3}]}}},
     "backend_shapes.cuda.typical.cases[0]: missing sizes ['n'] unknown sizes ['m']"),
    ({"cuda": {"typical": {"weight": 1.0, "cases": [{"n": -1}]}}}, "sizes must be >= 0"),
    ({"tpu": {"typical": {"weight": 1.0, "cases": [{"n": 3}]}}}, "backend_shapes.tpu"),
    ({"cuda": {"typical": {"weight": 0, "cases": [{"n": 3}]}}}, "weight"),
    ({"cuda": {"typical": {"cases": [{"n": 3}]}}}, "weight"),
])
def test_bad_backend_groups_are_one_line_errors_naming_the_field(op_copy, block, words):
    folder = op_copy("vadd")
    _with(folder, block)
    with pytest.raises(InputError) as e:
        load_op(folder)
    msg = str(e.value)
    assert words in msg and "op.yaml" in msg and "\n" not in msg
