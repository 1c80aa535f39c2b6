"""The two parallel moves on the library's histogram and cumsum_rows, checked by the real
harness (sandboxed worker, float64 reference, every shape group; no timing): private bins
on the typical cases (threaded: 16M values in 256 bins) and the serial copy on the others,
and with four interleaved copies (one thread on a million values in 1000 bins);
the blocked scan on the few long rows (3 x 65537) and the rows threaded on the many; the
vector scan on every row length (1, 3, 997, 1024, 65537: the leftover loop and the vector
loop)."""

from __future__ import annotations

import pytest

from kernelcrew.agents.transforms import apply_transform
from kernelcrew.kernels.kernelfile import parse_kernel_text
from kernelcrew.kernels.spec import load_op
from kernelcrew.tools.backends.backend import get_backend
from kernelcrew.tools.judge.harness import Harness
from tests.agents.conftest import baseline_text


@pytest.mark.parametrize("op, transform, params", [
    ("histogram", "private_bins", {"extents": {"counts": "bins"}}),
    ("histogram", "private_bins", {"extents": {"counts": "bins"}, "copies": 4}),
    ("cumsum_rows", "blocked_scan", {}),
    ("cumsum_rows", "vector_scan", {}),
])
def test_the_move_is_correct_on_every_group_of_the_library_op(op, transform, params):
    text = apply_transform(transform, baseline_text(op), params)
    assert text is not None
    spec = load_op(op)
    be = get_backend("cpu")
    kf = parse_kernel_text(text, "cpu")
    with Harness(spec, be, seed=0) as h:
        comp = be.compile(kf, spec)
        assert comp.ok, f"{comp.reason}\n{comp.log[-2000:]}"
        run = h.run(comp, kf, mode="verify", reps=0)
        assert run.correct, run.first_failure()
        assert {r.group for r in run.rows} == {"typical", "boundary", "unaligned"}
