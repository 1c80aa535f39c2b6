"""The peers: Kernel Tuner on a tiny knob space (real g++, real timing), NumPy on a small
op, the tunable kernel files of the library, and the roofline bound."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from kernelcrew.errors import InputError
from kernelcrew.evals import peers as P
from kernelcrew.kernels.kernelfile import load_kernel, validate_against
from kernelcrew.kernels.spec import library_ops, load_op
from kernelcrew.tools.backends.backend import get_backend
from tests.conftest import OPS

VADD_TUNABLE = """/* kernelcrew
entry: vadd
flags: [-O2]
knobs: {UNROLL: 1, THREADS: 1}
*/
// knob space: {UNROLL: [1, 4], THREADS: [1, 2]}
#include <cstdint>
#ifndef UNROLL
#define UNROLL 1
#endif
#ifndef THREADS
#define THREADS 1
#endif
extern "C" void vadd(const float* x, const float* z, float* y, int64_t n) {
  int64_t i = 0;
#pragma omp parallel for num_threads(THREADS)
  for (int64_t b = 0; b < n / UNROLL; ++b)
    for (int u = 0; u < UNROLL; ++u) y[b * UNROLL + u] = x[b * UNROLL + u] + z[b * UNROLL + u];
  for (i = (n / UNROLL) * UNROLL; i < n; ++i) y[i] = x[i] + z[i];
}
"""


def test_kernel_tuner_times_a_tiny_space_through_the_wrapper(tmp_path: Path) -> None:
    tun = tmp_path / "vadd.cpp"
    tun.write_text(VADD_TUNABLE)
    res = P.kernel_tuner_peer(OPS / "vadd", tunable=tun, seeds=2,
                              strategies=("brute_force", "random_sample"), timeout_s=120)
    assert not res.error, res.error
    assert res.size == 4 and res.invalid == 0
    # the wrapper's clock_gettime milliseconds: without it every configuration reads 0 ms
    assert res.optimum_ms is not None and res.optimum_ms > 0
    assert res.default_ms is not None and res.default_ms >= res.optimum_ms
    assert set(res.optimum) == {"UNROLL", "THREADS"}
    by = {s.strategy: s for s in res.strategies}
    assert by["brute_force"].evaluated == [4] and by["brute_force"].reached == 1
    assert 1 <= by["brute_force"].median_evals <= 4
    # random sampling of the whole space always finds the optimum within the 4 configurations
    assert by["random_sample"].runs == 2 and by["random_sample"].reached == 2
    assert res.best_strategy() is not None


def test_timing_wrapper_follows_the_signature() -> None:
    name, src = P.timing_wrapper(load_op("rmsnorm"), "rmsnorm")
    assert name == "kt_time_rmsnorm"
    assert ("float kt_time_rmsnorm(const float* x, const float* w, float* y, float eps, "
            "int64_t rows, int64_t cols)") in src
    assert "rmsnorm(x, w, y, eps, rows, cols);" in src and "clock_gettime" in src


TUNABLE = sorted(p.stem for p in P.TUNABLE_DIR.glob("*.cpp"))


def test_the_first_six_library_ops_have_tunable_kernels() -> None:
    # Kernel Tuner runs where an op has knobs; the newer ops have none
    assert {"scale_shift_sum", "small_matmul", "add_gelu_muladd", "softmax_rows", "rmsnorm",
            "transpose"} <= set(TUNABLE) <= set(library_ops())


@pytest.mark.parametrize("op", TUNABLE)
def test_each_tunable_kernel_is_valid(op: str) -> None:
    spec = load_op(op)
    kf = load_kernel(P.tunable_path(op))
    validate_against(kf, spec)
    space = P.knob_space(kf)
    assert set(space) == set(kf.meta.knobs) and P.space_size(space) >= 4
    assert all(kf.meta.knobs[k] in v for k, v in space.items())
    comp = get_backend("cpu").compile(kf, spec)
    assert comp.ok, comp.reason + comp.log[-500:]


def test_a_knob_space_must_name_the_declared_knobs(tmp_path: Path) -> None:
    bad = tmp_path / "k.cpp"
    bad.write_text(VADD_TUNABLE.replace("{UNROLL: [1, 4], THREADS: [1, 2]}", "{UNROLL: [1, 4]}"))
    with pytest.raises(InputError, match="knob space"):
        P.knob_space(load_kernel(bad))
    bad.write_text(VADD_TUNABLE.replace("// knob space: ", "// space: "))
    with pytest.raises(InputError, match="knob space"):
        P.knob_space(load_kernel(bad))


def test_tunable_op_folder_keeps_one_typical_case_and_the_boundary(tmp_path: Path) -> None:
    folder = P.tunable_op_folder("transpose", tmp_path)
    spec = load_op(folder)
    assert [c.sizes for c in spec.cases() if c.group == "typical"] == \
        [P.tuning_case(load_op("transpose")).sizes]
    assert set(spec.shapes) == {"typical", "boundary"}
    assert (folder / "baseline.cpp").read_text() == P.tunable_path("transpose").read_text()


def test_numpy_peer_times_the_idiom_in_a_child_process() -> None:
    res = P.numpy_peer(OPS / "vadd", reps=3)
    assert not res.error, res.error
    assert res.expression == "x + z"
    assert res.typical_ms and res.typical_ms > 0
    assert [c.correct for c in res.cases] == [True]


def test_numpy_peer_is_timed_in_the_kernels_cache_state(tmp_path: Path) -> None:
    # vadd's 2 x 2.4 MB fits in half of any last-level cache this runs on: warm, as the
    # kernels are timed; the same op marked `cache: cold` is flushed before each call,
    # and its back-to-back time is kept next to it
    warm = P.numpy_peer(OPS / "vadd", reps=3)
    assert [c.cache for c in warm.cases] == ["warm"]
    assert warm.cases[0].no_flush_ms is None and warm.no_flush_ms == warm.typical_ms
    folder = tmp_path / "vadd"
    shutil.copytree(OPS / "vadd", folder)
    with open(folder / "op.yaml", "a") as f:
        f.write("cache: cold\n")
    cold = P.numpy_peer(folder, reps=3)
    assert not cold.error, cold.error
    assert [c.cache for c in cold.cases] == ["cold"]
    assert cold.cases[0].no_flush_ms is not None and cold.cases[0].no_flush_ms > 0
    assert cold.no_flush_ms == pytest.approx(cold.cases[0].no_flush_ms)


def test_every_library_op_has_a_numpy_expression() -> None:
    assert set(library_ops()) <= set(P.NUMPY_EXPRESSIONS)


def test_roofline_bound_from_the_cost_model() -> None:
    spec = load_op(OPS / "vadd")  # cost: bytes 12*n, flops n
    peaks = P.Peaks(gbps=10.0, gflops=100.0, source="test")
    b = P.bound_for(spec, [{"n": 1_000_000}], peaks, time_ms=2.4)
    assert b.limit == "bandwidth"
    assert b.bound_ms == pytest.approx(1.2)  # 12e6 B at 10 GB/s
    assert b.bound_share == pytest.approx(0.5)
    assert b.achieved_gbps == pytest.approx(5.0) and b.bandwidth_share == pytest.approx(0.5)
