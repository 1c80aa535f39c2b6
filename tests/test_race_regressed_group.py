"""A challenger faster overall whose fault is one regressed group is timed in a second
duel and judged on both duels' rounds (real workers, real processes): a real regression
stays one, and the reason says the verdict came from two duels."""

from __future__ import annotations

from pathlib import Path

from kernelcrew.kernels.kernelfile import load_kernel
from kernelcrew.kernels.spec import load_op
from kernelcrew.tools.backends.backend import get_backend
from kernelcrew.tools.config import BenchSettings
from kernelcrew.tools.judge.evaluate import race
from kernelcrew.tools.judge.harness import Harness

# The same vectorized row sums for both kernels, repeated: the incumbent makes eight passes
# on every case, the challenger one, except on the unaligned case (1001 rows) where it
# makes twenty-four. The ratios (8x on typical, 1/3 on unaligned) come from the pass
# counts, not from how much a machine gains by vectorizing; the overall speedup (about
# 2.8x by the groups' weights) stays beyond the band on a machine whose noise is ±50%.
PASSES = """/* kernelcrew
entry: scale_shift_sum
flags: [-O3, -march=native, -fopenmp-simd]
*/
#include <cstdint>

extern "C" void scale_shift_sum(const float* __restrict__ x, float* __restrict__ out,
                                float a, float b, int64_t rows, int64_t cols) {
    const int passes = PASSES_HERE;
    for (int p = 0; p < passes; ++p)
        for (int64_t i = 0; i < rows; ++i) {
            float acc = 0.0f;
#pragma omp simd reduction(+ : acc)
            for (int64_t j = 0; j < cols; ++j) acc += a * x[i * cols + j] + b;
            out[i] = acc;
        }
}
"""
SLOW_ON_UNALIGNED = PASSES.replace("PASSES_HERE", "rows == 1001 ? 24 : 1")
EIGHT_PASSES = PASSES.replace("PASSES_HERE", "8")


def test_a_regressed_group_is_timed_again_and_stays_a_regression(tmp_path: Path):
    spec = load_op("scale_shift_sum")
    be = get_backend("cpu")
    (tmp_path / "slow_on_unaligned.cpp").write_text(SLOW_ON_UNALIGNED)
    (tmp_path / "eight_passes.cpp").write_text(EIGHT_PASSES)
    challenger = load_kernel(tmp_path / "slow_on_unaligned.cpp")
    incumbent = load_kernel(tmp_path / "eight_passes.cpp")
    comps = [be.compile(k, spec) for k in (challenger, incumbent)]
    assert all(c.ok for c in comps), [c.reason for c in comps]
    # one typical case (milliseconds) and the unaligned case of 1001 rows
    cases = [c for c in spec.cases() if (c.group, c.index) in (("typical", 1), ("unaligned", 0))]
    assert [c.sizes["rows"] for c in cases] == [16384, 1001]
    with Harness(spec, be, seed=3, bench=BenchSettings(reps=8, rounds=8), cases=cases) as h:
        r = race(h, (comps[0], challenger), (comps[1], incumbent))
    assert r.gate.group_speedups["typical"] > 3.0, r.gate.reason
    assert r.gate.group_speedups["unaligned"] < 0.5, r.gate.reason
    assert r.gate.verdict == "same", r.gate.reason
    assert "the unaligned group regresses" in r.gate.reason
    assert "judged on two duels, 16 rounds" in r.gate.reason
