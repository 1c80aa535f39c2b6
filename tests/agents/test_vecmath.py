"""The inline exp/erf that `vector_math` puts in place of libm calls: accurate over the
whole float range, right at the edges (inf, NaN, underflow), and vectorizable."""

from __future__ import annotations

import ctypes
import math
import re
import subprocess

import numpy as np
import pytest

from kernelcrew.agents.transforms.cpu.vector_exp_erf import BITS, ERFF, EXPF

SRC = "#include <cstdint>\n" + BITS + EXPF + ERFF + """
extern "C" void vexp(const float* x, float* y, int64_t n) {
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) y[i] = kc_expf(x[i]);
}
extern "C" void verf(const float* x, float* y, int64_t n) {
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) y[i] = kc_erff(x[i]);
}
"""


@pytest.fixture(scope="module")
def lib(tmp_path_factory):
    d = tmp_path_factory.mktemp("vecmath")
    (d / "vm.cpp").write_text(SRC)
    r = subprocess.run(["g++", "-std=c++17", "-O3", "-march=native", "-fopenmp-simd", "-shared",
                        "-fPIC", "-fopt-info-vec-optimized", "vm.cpp", "-o", "vm.so"], cwd=d,
                       capture_output=True, text=True, check=True)
    # the compiler's report names the line of each loop it vectorized
    lines = SRC.splitlines()
    loops = {name: next(i + 1 for i, t in enumerate(lines) if "for (" in t and i > at)
             for name in ("vexp", "verf")
             for at in [next(i for i, t in enumerate(lines) if f" {name}(" in t)]}
    done = {name for name, ln in loops.items()
            if re.search(rf"vm\.cpp:{ln}:\d+: optimized: loop vectorized", r.stderr)}
    return ctypes.CDLL(str(d / "vm.so")), done, r.stderr


def call(lib, name: str, x: np.ndarray) -> np.ndarray:
    x = np.ascontiguousarray(x, dtype=np.float32)
    y = np.empty_like(x)
    getattr(lib, name)(ctypes.c_void_p(x.ctypes.data), ctypes.c_void_p(y.ctypes.data),
                       ctypes.c_int64(x.size))
    return y


def test_both_loops_vectorize(lib):
    """Holds on any SIMD ISA: the helpers are branch-free as the vectorizer sees them, so
    the loops need no masked lanes (AVX2 has none; AVX-512 would hide a branch)."""
    missed = [ln for ln in lib[2].splitlines() if "missed" in ln]
    assert lib[1] == {"vexp", "verf"}, "\n".join(missed[:6])


def test_expf_is_within_two_ulp(lib):
    x = np.linspace(-87.3, 88.7, 1_000_003, dtype=np.float32)
    y = call(lib[0], "vexp", x).astype(np.float64)
    ref = np.exp(x.astype(np.float64))
    assert np.max(np.abs(y - ref) / ref) < 2.5 * 2.0 ** -24 * 2
    edges = np.array([np.inf, -np.inf, np.nan, 89.0, -104.0, -200.0, 0.0, -np.nan, 1e30,
                      -1e30], np.float32)
    got = call(lib[0], "vexp", edges)
    assert got[0] == np.inf and got[1] == 0.0 and np.isnan(got[2]) and got[3] == np.inf
    assert got[4] == 0.0 and got[5] == 0.0 and got[6] == 1.0 and np.isnan(got[7])
    assert got[8] == np.inf and got[9] == 0.0


def test_expf_subnormal_results(lib):
    """Below -87.3 the result is subnormal: right to the float's absolute resolution."""
    x = np.linspace(-103.9, -87.3, 100_001, dtype=np.float32)
    y = call(lib[0], "vexp", x).astype(np.float64)
    assert np.max(np.abs(y - np.exp(x.astype(np.float64)))) <= 2.0 ** -149


def test_erff_absolute_error_below_2e7(lib):
    z = np.linspace(-7.0, 7.0, 200_001, dtype=np.float32)
    w = call(lib[0], "verf", z).astype(np.float64)
    ref = np.array([math.erf(float(v)) for v in z])
    assert np.max(np.abs(w - ref)) < 2e-7
    tiny = np.array([1e-30, -1e-20, 0.0], np.float32)
    assert np.allclose(call(lib[0], "verf", tiny), 2 / math.sqrt(math.pi) * tiny, rtol=1e-6)
    edges = call(lib[0], "verf", np.array([np.inf, -np.inf, np.nan], np.float32))
    assert edges[0] == 1.0 and edges[1] == -1.0 and np.isnan(edges[2])
