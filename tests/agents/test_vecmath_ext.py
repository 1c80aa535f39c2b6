"""The inline tanh/log that `vector_math_ext` puts in place of libm calls: accurate over the
whole float range, right at the edges (inf, NaN, 0, subnormals), and vectorizable with the
target's vectors (AVX2 and AVX-512 alike: the code has selects only)."""

from __future__ import annotations

import ctypes
import subprocess

import numpy as np
import pytest

from kernelcrew.agents.transforms import apply_transform
from kernelcrew.agents.transforms.cpu.vector_tanh_log import EXP, LOGF, SELECT, TANH1P, TANHF

SRC = "#include <cstdint>\n" + SELECT + EXP + TANHF + TANH1P + LOGF + """
extern "C" void vtanh(const float* __restrict__ x, float* __restrict__ y, int64_t n) {
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) y[i] = kc_tanhf(x[i]);
}
extern "C" void vtanh1p(const float* __restrict__ x, float* __restrict__ y, int64_t n) {
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) y[i] = kc_tanh1pf(x[i]);
}
extern "C" void vlog(const float* __restrict__ x, float* __restrict__ y, int64_t n) {
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) y[i] = kc_logf(x[i]);
}
"""


@pytest.fixture(scope="module")
def lib(tmp_path_factory):
    d = tmp_path_factory.mktemp("vecmath_ext")
    (d / "vm.cpp").write_text(SRC)
    subprocess.run(["g++", "-std=c++17", "-O3", "-march=native", "-fopenmp-simd", "-shared",
                    "-fPIC", "vm.cpp", "-o", "vm.so"], cwd=d, capture_output=True, text=True,
                   check=True)
    return ctypes.CDLL(str(d / "vm.so"))


def _vectorized_loops(tmp_path, march: str) -> int:
    (tmp_path / "vm.cpp").write_text(SRC)
    r = subprocess.run(["g++", "-std=c++17", "-O3", march, "-fopenmp-simd", "-S",
                        "-fopt-info-vec-optimized", "vm.cpp", "-o", "vm.s"], cwd=tmp_path,
                       capture_output=True, text=True, check=True)
    return r.stderr.count("loop vectorized")


def call(lib, name: str, x: np.ndarray) -> np.ndarray:
    x = np.ascontiguousarray(x, dtype=np.float32)
    y = np.empty_like(x)
    getattr(lib, name)(ctypes.c_void_p(x.ctypes.data), ctypes.c_void_p(y.ctypes.data),
                       ctypes.c_int64(x.size))
    return y


@pytest.mark.parametrize("march", ["-mavx2", "-mavx512f"])
def test_both_loops_vectorize_for_avx2_and_avx512(tmp_path, march):
    """Compiled for each target (only assembled, not run): no branch keeps them scalar."""
    assert _vectorized_loops(tmp_path, march) >= 3


def ulps(got: np.ndarray, ref: np.ndarray) -> float:
    spacing = np.spacing(np.abs(ref).astype(np.float32)).astype(np.float64)
    return float(np.max(np.abs(got.astype(np.float64) - ref) / spacing))


def test_tanhf_is_within_two_ulp(lib):
    x = np.concatenate([np.linspace(-12, 12, 2_000_001, dtype=np.float32),
                        np.geomspace(1e-30, 1e-2, 10001).astype(np.float32)])
    got = call(lib, "vtanh", x)
    assert ulps(got, np.tanh(x.astype(np.float64))) <= 2.0
    edges = np.array([np.inf, -np.inf, np.nan, 0.0, -0.0, 1e30, -1e30, 1e-40], np.float32)
    g = call(lib, "vtanh", edges)
    assert g[0] == 1.0 and g[1] == -1.0 and np.isnan(g[2]) and g[3] == 0.0
    assert g[5] == 1.0 and g[6] == -1.0 and g[7] == np.float32(1e-40)


def test_logf_is_within_two_ulp(lib):
    x = np.concatenate([np.geomspace(1e-45, 3e38, 2_000_001).astype(np.float32),
                        np.linspace(0.5, 2.0, 1_000_001, dtype=np.float32)])
    x = x[x > 0]
    got = call(lib, "vlog", x)
    ref = np.log(x.astype(np.float64))
    near_one = np.abs(ref) < 1e-30  # log(1) = 0: spacing 0, compare exactly
    assert np.all(got[near_one] == 0.0)
    assert ulps(got[~near_one], ref[~near_one]) <= 2.0
    edges = np.array([0.0, -0.0, np.inf, -1.0, np.nan, -np.inf], np.float32)
    g = call(lib, "vlog", edges)
    assert g[0] == -np.inf and g[1] == -np.inf and g[2] == np.inf
    assert np.isnan(g[3]) and np.isnan(g[4]) and np.isnan(g[5])


def test_one_plus_tanh_is_within_three_ulp(lib):
    """kc_tanh1pf(x) = 1 + tanh(x) as 2 / (1 + e^{-2x}): close to the float64 value where
    1 + tanhf(x) in float loses everything (x << 0), and exact at the edges."""
    x = np.concatenate([np.linspace(-40, 12, 2_000_001, dtype=np.float32),
                        np.geomspace(1e-30, 1e-2, 10001).astype(np.float32)])
    got = call(lib, "vtanh1p", x)
    ref = 2.0 / (1.0 + np.exp(-2.0 * x.astype(np.float64)))
    tiny = ref < 1.2e-38  # the clamp: under the smallest normal float, compared absolutely
    assert ulps(got[~tiny], ref[~tiny]) <= 3.0
    assert np.all(np.abs(got[tiny]) <= 4e-38)
    edges = np.array([np.inf, -np.inf, np.nan, 0.0, 1e30, -1e30], np.float32)
    g = call(lib, "vtanh1p", edges)
    assert g[0] == 2.0 and g[1] < 4e-38 and np.isnan(g[2]) and g[3] == 1.0
    assert g[4] == 2.0 and g[5] < 4e-38


GELU = """/* kernelcrew
entry: f
flags: [-O2]
*/
#include <math.h>
#include <stdint.h>

extern "C" void f(float* x, float* y, int64_t n) {
    for (int i = 0; i < (int)n; i++) {
        float v = x[i];
        y[i] = BODY;
    }
}
"""


@pytest.mark.parametrize("body, want", [
    ("0.5f * v * (1.0f + tanhf(0.79788456f * (v + 0.044715f * v * v * v)))",
     "0.5f * v * (kc_tanh1pf(0.79788456f * (v + 0.044715f * v * v * v)))"),
    ("(tanhf(v) + 1) * 0.5f", "(kc_tanh1pf(v)) * 0.5f"),
    ("1.f - tanhf(2.0f * v)", "kc_tanh1pf(-(2.0f * v))"),
    # not a 1 + tanh form: each call by the inline tanh
    ("tanhf(v) - 1.0f", "kc_tanhf(v) - 1.0f"),
    ("2.0f + tanhf(v)", "2.0f + kc_tanhf(v)"),
    ("1.0f + tanhf(v) * v", "1.0f + kc_tanhf(v) * v"),
    # a call to replace inside the argument: the two are replaced apart
    ("1.0f + tanhf(logf(v))", "1.0f + kc_tanhf(kc_logf(v))"),
])
def test_one_plus_tanh_is_taken_whole_and_only_that(body, want):
    out = apply_transform("vector_math_ext", GELU.replace("BODY", body))
    assert out is not None and f"y[i] = {want};" in out, out
    assert ("static inline float kc_tanh1pf" in out) == ("kc_tanh1pf(" in want)
