"""The inline tanh/log that `vector_math_ext` puts in place of libm calls: accurate over the
whole float range, right at the edges (inf, NaN, 0, subnormals), and vectorizable with the
target's vectors (AVX2 and AVX-512 alike: the code has selects only)."""

from __future__ import annotations

import ctypes
import subprocess

import numpy as np
import pytest

from kernelcrew.agents.transforms.vecmath_ext import LOGF, SELECT, TANHF

SRC = "#include <cstdint>\n" + SELECT + TANHF + LOGF + """
extern "C" void vtanh(const float* __restrict__ x, float* __restrict__ y, int64_t n) {
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) y[i] = kc_tanhf(x[i]);
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
    assert _vectorized_loops(tmp_path, march) >= 2


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
