"""Row accumulators: a per-output reduction nest with a short constant inner loop (filter
taps, padding tested per tap) becomes a strip of accumulators with one unit-stride loop per
tap, the padding tests its bounds. Pinned on sources in several styles (a blur with `<=`
loops and signed offsets, a FIR filter with a guarded update, the library's conv2d through
its helper), each compiled and compared with a float64 reference, and on the forms where
the move would be wrong or would not pay."""

from __future__ import annotations

import ctypes

import numpy as np
import pytest

from kernelcrew.agents.transforms import apply_transform
from kernelcrew.agents.transforms.catalogue import not_applicable
from kernelcrew.agents.transforms.cpu.row_accumulate import MARK, row_accumulate, row_reasons
from tests.agents.test_reach import build, kernel, ptr
from tests.agents.test_specialists import all_proposals, ctx_for

# a box blur as image code writes it: radius macro, signed tap offsets, `<=` bounds,
# skipped taps outside the image
BLUR = """
#define R 2

extern "C" void f(const float* src, const float* k, float* dst, long height, long width) {
    int h = (int)height, w = (int)width;
    for (int y = 0; y < h; ++y) {
        for (int x = 0; x < w; ++x) {
            float s = 0.f;
            for (int dy = -R; dy <= R; ++dy) {
                for (int dx = -R; dx <= R; ++dx) {
                    int yy = y + dy;
                    int xx = x + dx;
                    if (yy < 0 || yy >= h || xx < 0 || xx >= w)
                        continue;
                    s += src[yy * w + xx] * k[(dy + R) * (2 * R + 1) + (dx + R)];
                }
            }
            dst[y * w + x] = s;
        }
    }
}
"""

# a causal FIR filter with the update guarded instead of skipped, `int` counters declared
# at the top of a static helper (the move reads it through the view with them in their loops)
FIR = """
#define TAPS 5

static void fir(const float *in, const float *taps, float *out, int n) {
    int i, t;
    for (i = 0; i < n; i++) {
        float acc = taps[0] * 0.0f;
        for (t = 0; t < TAPS; t++) {
            int j = i - t;
            if (j >= 0 && j < n) acc = acc + taps[t] * in[j];
        }
        out[i] = acc;
    }
}

extern "C" void f(const float* in, const float* taps, float* out, long n) {
    fir(in, taps, out, (int)n);
}
"""


def blur_ref(src: np.ndarray, k: np.ndarray) -> np.ndarray:
    h, w = src.shape
    r = 2
    pad = np.zeros((h + 2 * r, w + 2 * r))
    pad[r:r + h, r:r + w] = src
    out = np.zeros((h, w))
    for dy in range(-r, r + 1):
        for dx in range(-r, r + 1):
            out += k[dy + r, dx + r] * pad[r + dy:r + dy + h, r + dx:r + dx + w]
    return out


def test_blur_strips_with_the_padding_as_bounds(tmp_path):
    text = apply_transform("row_accumulate", kernel(BLUR))
    assert text is not None and MARK in text
    assert "#pragma omp simd" in text and "-fopenmp-simd" in text
    # the x-dependent tests left the body; the one on the row stays a skip
    assert "if ((yy < 0) || (yy >= h)) continue;" in text
    assert "xx < 0" not in text and "xx >= w" not in text
    lib, old = build(text, tmp_path, "new"), build(kernel(BLUR), tmp_path, "old")
    rng = np.random.default_rng(3)
    k = rng.standard_normal((5, 5)).astype(np.float32)
    # narrower than the radius, one strip, several strips with a short last one
    for h, w in ((1, 1), (3, 2), (6, 5), (9, 257), (4, 600)):
        img = rng.standard_normal((h, w)).astype(np.float32)
        outs = []
        for f in (lib.f, old.f):
            out = np.full((h, w), np.nan, np.float32)
            f(ptr(img), ptr(k), ptr(out), ctypes.c_long(h), ctypes.c_long(w))
            outs.append(out)
        assert np.allclose(outs[0], blur_ref(img.astype(np.float64), k), rtol=1e-4,
                           atol=1e-4), (h, w)
        # the same terms in the same order (a multiply-add may be contracted differently):
        # the two builds agree to the last bits
        assert np.allclose(outs[0], outs[1], rtol=1e-5, atol=1e-5), (h, w)


def test_an_output_index_declared_before_the_accumulator(tmp_path):
    """darknet-style: the output's index is computed first, then the sum; the index is
    declared again where the statements after the nest run."""
    src = BLUR.replace("            float s = 0.f;",
                       "            int out_index = x + w * y;\n            float s = 0.f;") \
        .replace("dst[y * w + x] = s;", "dst[out_index] = s;")
    text = apply_transform("row_accumulate", kernel(src))
    assert text is not None and MARK in text
    lib = build(text, tmp_path)
    rng = np.random.default_rng(4)
    k = rng.standard_normal((5, 5)).astype(np.float32)
    for h, w in ((2, 3), (7, 300)):
        img = rng.standard_normal((h, w)).astype(np.float32)
        out = np.full((h, w), np.nan, np.float32)
        lib.f(ptr(img), ptr(k), ptr(out), ctypes.c_long(h), ctypes.c_long(w))
        assert np.allclose(out, blur_ref(img.astype(np.float64), k), rtol=1e-4, atol=1e-4)
    # used inside the nest, it would have to be per pixel there too: not offered
    inside = src.replace("s += src[yy * w + xx]", "s += (float)out_index * src[yy * w + xx]")
    assert row_accumulate(inside, "f") is None


def test_fir_through_its_helper_with_a_guarded_update(tmp_path):
    text = apply_transform("row_accumulate", kernel(FIR))
    assert text is not None and MARK in text
    lib = build(text, tmp_path)
    rng = np.random.default_rng(5)
    taps = rng.standard_normal(5).astype(np.float32)
    for n in (1, 3, 5, 6, 255, 256, 257, 1000):
        x = rng.standard_normal(n).astype(np.float32)
        y = np.full(n, np.nan, np.float32)
        lib.f(ptr(x), ptr(taps), ptr(y), ctypes.c_long(n))
        ref = np.convolve(x.astype(np.float64), taps.astype(np.float64))[:n]
        assert np.allclose(y, ref, rtol=1e-4, atol=1e-4), n


def test_library_conv2d_through_its_helper_is_proposed_and_correct(small_ops, tmp_path):
    from kernelcrew.tools.judge.check import check
    from tests.agents.conftest import QUICK, baseline_text

    ctx = ctx_for("conv2d")
    props = [p for p in all_proposals(ctx) if p.change.kind == "row_accumulate"]
    assert props and props[0].author == "memory_access"
    text = apply_transform("row_accumulate", baseline_text("conv2d"))
    assert text is not None and MARK in text
    assert "#pragma omp parallel for" in text  # the source's own pragma is kept
    path = tmp_path / "conv2d-rows.cpp"
    path.write_text(text)
    res = check(str(small_ops("conv2d")), str(path), "cpu", bench=QUICK)
    assert res.correct, res.reason


WRONG = {
    # the statement after the nest writes the array the nest reads (an in-place filter)
    "in place": (BLUR.replace("const float* src", "float* src")
                 .replace("dst[y * w + x] = s;", "src[y * w + x] = s;"),
                 "writes an array the reduction nest reads"),
    # the same through a row pointer: the write lands in the buffer the nest reads
    "in place, row pointer": (BLUR.replace("const float* src", "float* src")
                              .replace("            float s = 0.f;",
                                       "            float* row = src + y * w;\n"
                                       "            float s = 0.f;")
                              .replace("dst[y * w + x] = s;", "row[x] = s;"),
                              "writes an array the reduction nest reads"),
    # a test on the pixel that is not the pixel plus an offset against a bound
    "parity test": (BLUR.replace("if (yy < 0 || yy >= h || xx < 0 || xx >= w)",
                                 "if (yy < 0 || yy >= h || xx % 2 == 1)"),
                    "not the pixel plus an offset"),
    # a column walk: the pixel strides through the image
    "strided read": (BLUR.replace("src[yy * w + xx]", "src[xx * h + yy]"),
                     "not read with unit stride"),
    # the nest stores to memory besides the accumulator
    "store in the nest": (BLUR.replace("s += src[yy * w + xx]",
                                       "dst[0] = 1.0f;\n                    s += src[yy * w + xx]"),
                          "a statement other than"),
    # the accumulator steers the nest: iterations of the pixel loop no longer stand alone
    "early exit": (BLUR.replace("if (yy < 0 || yy >= h || xx < 0 || xx >= w)",
                                "if (s > 4.0f || yy < 0 || yy >= h || xx < 0 || xx >= w)"),
                   "a test the rewrite cannot read"),
    # an innermost count that changes inside the nest
    "taps per row": (BLUR.replace("dx <= R", "dx <= dy + R"), "not a short constant loop"),
    # a count known at run time and no test on the pixel: a dot product, vectorized as it is
    "runtime dot": (BLUR.replace("dx <= R", "dx <= (int)width / 64")
                    .replace("if (yy < 0 || yy >= h || xx < 0 || xx >= w)\n"
                             "                        continue;\n", ""),
                    "tests nothing on x"),
}


@pytest.mark.parametrize("case", sorted(WRONG))
def test_not_offered_where_wrong_or_pointless(case):
    src, why = WRONG[case]
    assert row_accumulate(src, "f") is None
    reasons = row_reasons(src, "f")
    assert any(why in r for r in reasons), reasons


def test_the_catalogue_says_why_not():
    why = not_applicable(kernel(WRONG["in place"][0]))
    assert "writes an array the reduction nest reads" in why["row_accumulate"]


# a depthwise causal filter whose width is known only at run time, the time loop inside
# the channels, the causal edge tested per tap
CAUSAL = """
extern "C" void f(const float* x, const float* w, float* y, long channels, long length,
                  long taps) {
    int C = (int)channels, L = (int)length, K = (int)taps;
    for (int c = 0; c < C; c++) {
        for (int t = 0; t < L; t++) {
            float acc = 0.0f;
            for (int k = 0; k < K; k++) {
                int src = t - (K - 1) + k;
                if (src >= 0) acc += w[c * K + k] * x[c * L + src];
            }
            y[c * L + t] = acc;
        }
    }
}
"""


def test_a_filter_width_known_at_run_time_gets_strips(tmp_path):
    """`k < K` with the causal edge tested per tap: the tap loop cannot vectorize however
    long it is, so the strips run for every K, the test a bound of each tap's pass; the
    float64 result for short and long filters, the causal head included."""
    text = apply_transform("row_accumulate", kernel(CAUSAL))
    assert text is not None and MARK in text
    lib = build(text, tmp_path, "causal")
    rng = np.random.default_rng(9)
    for C, L, K in ((3, 700, 4), (2, 5, 4), (1, 1, 1), (2, 300, 3), (2, 64, 11), (1, 3, 9)):
        x = rng.standard_normal(C * L).astype(np.float32)
        w = rng.standard_normal(C * K).astype(np.float32)
        y = np.full(C * L, np.nan, np.float32)
        lib.f(ptr(x), ptr(w), ptr(y), ctypes.c_long(C), ctypes.c_long(L), ctypes.c_long(K))
        xd, wd = x.reshape(C, L).astype(np.float64), w.reshape(C, K).astype(np.float64)
        want = np.zeros((C, L))
        for k in range(K):
            shift = K - 1 - k
            want[:, shift:] += wd[:, k:k + 1] * xd[:, :L - shift] if shift < L else 0
        assert np.allclose(y.reshape(C, L), want, rtol=1e-5, atol=1e-5), (C, L, K)
