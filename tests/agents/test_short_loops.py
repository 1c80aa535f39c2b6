"""Loops that run a constant, small number of times (the taps of a 3x3 filter, a 4-wide
tile written out as a loop) are left to the compiler, which unrolls them whole at -O3:
simd and split accumulators are not offered there, and the catalogue says why. A bound
that only looks constant (a knob a tuner may change, a parameter) is not one."""

from __future__ import annotations

import ctypes

import numpy as np

from kernelcrew.agents.transforms import apply_transform, parse_any
from kernelcrew.agents.transforms.analysis.common import constant_trip, model_of
from kernelcrew.agents.transforms.catalogue import not_applicable
from tests.agents.test_reach import build, kernel, ptr

# a 3x3 filter, image-library style: taps counted to a macro, the pixel in a helper
FILTER3 = kernel("""
#define KSIZE 3
static float tap_sum(const float* img, const float* w, int width, int y, int x) {
    float sum = 0.0f;
    for (int ky = 0; ky < KSIZE; ky++) {
        for (int kx = 0; kx < KSIZE; kx++) {
            sum += img[(y + ky) * width + x + kx] * w[ky * KSIZE + kx];
        }
    }
    return sum;
}

extern "C" void f(const float* img, const float* w, float* out, int64_t h, int64_t wd) {
    for (int y = 0; y + KSIZE <= h; y++)
        for (int x = 0; x + KSIZE <= wd; x++)
            out[y * wd + x] = tap_sum(img, w, (int)wd, y, x);
}
""")

# the same reduction over a literal 4 and an inclusive 0..2, and over a run-time n
SHAPES = kernel("""
extern "C" void f(const float* a, float* out, int64_t n) {
    float s4 = 0.0f, s3 = 0.0f, sn = 0.0f;
    for (int k = 0; k < 4; ++k) s4 += a[k];
    for (int k = 0; k <= 2; ++k) s3 += a[k];
    for (int64_t i = 0; i < n; ++i) sn += a[i];
    out[0] = s4; out[1] = s3; out[2] = sn;
}
""")

# a knob: `#ifndef` guards it, a tuner may set it to 64
KNOB = kernel("""
#ifndef CHUNK
#define CHUNK 4
#endif
extern "C" void f(const float* a, float* out, int64_t n) {
    for (int64_t b = 0; b + CHUNK <= n; b += CHUNK) {
        float s = 0.0f;
        for (int k = 0; k < CHUNK; ++k) s += a[b + k];
        out[b / CHUNK] = s;
    }
}
""")


def _trips(text: str, entry: str = "f") -> list[int | None]:
    s, m = model_of(parse_any(text).body, entry)
    return [constant_trip(s, m, lp) for lp in m.loops]


def test_constant_trip_counts_literals_macros_and_inclusive_bounds():
    assert _trips(SHAPES) == [4, 3, None]
    assert _trips(FILTER3, "tap_sum") == [3, 3]
    # the knob and the loop over it are not constant; the outer loop's bound is a parameter
    assert _trips(KNOB) == [None, None]


def test_simd_and_accumulators_leave_short_constant_loops_to_the_compiler():
    # the 3x3 taps: nothing for simd or accumulators to take
    for move in ("simd", "accumulators"):
        out = apply_transform(move, FILTER3)
        assert out is None or "#pragma omp simd" not in out, move
    why = not_applicable(FILTER3)
    assert "runs a constant 3 time(s)" in why.get("accumulators", "") + why.get("simd", "")
    # in SHAPES only the run-time loop gets accumulators
    out = apply_transform("accumulators", SHAPES)
    assert out is not None and out.count("kernelcrew: accumulators") == 1
    assert "for (int k = 0; k < 4; ++k) s4 += a[k];" in out
    assert "for (int k = 0; k <= 2; ++k) s3 += a[k];" in out


def test_a_knob_bound_is_not_taken_for_a_constant(tmp_path):
    out = apply_transform("simd", KNOB)
    assert out is not None and "#pragma omp simd" in out
    # still right, with the knob's default
    lib = build(out, tmp_path)
    a = np.arange(64, dtype=np.float32)
    got = np.zeros(16, dtype=np.float32)
    lib.f(ptr(a), ptr(got), ctypes.c_int64(64))
    np.testing.assert_allclose(got, a.reshape(16, 4).sum(axis=1))
