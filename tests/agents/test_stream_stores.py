"""Streaming stores: a threaded row loop that only writes its output, with non-temporal
stores. Pinned on the library's embedding (row pointers, `int` counters), a double map
with `size_t` counters and a pragma already in the source, and a macro-defined body; the
results are bit for bit the loop's, on rows of every alignment and length. Refused where
the output is read back, passed on or updated in place, on a flat loop, on the serial path,
and while the nest could still be threaded (threading comes first)."""

from __future__ import annotations

import ctypes

import numpy as np
import pytest

from kernelcrew.agents.heuristic.memory_access import MemoryAccess
from kernelcrew.agents.transforms import apply_transform
from kernelcrew.agents.transforms.catalogue import not_applicable
from kernelcrew.agents.transforms.cpu.stream_stores import stream_reasons
from tests.agents.conftest import baseline_text
from tests.agents.test_private_bins import _library_ctx
from tests.agents.test_reach import build, kernel, parse_any, ptr


def _threaded(text: str) -> str:
    out = apply_transform("omp_parallel", text)
    assert out is not None
    return out


def test_embedding_rows_are_streamed_bit_for_bit(tmp_path):
    text = baseline_text("embedding")
    assert apply_transform("stream_stores", text) is None  # not before threading
    assert "threading comes first" in not_applicable(text)["stream_stores"]
    threaded = _threaded(text)
    out = apply_transform("stream_stores", threaded)
    assert out is not None and "kc_stream64(out_bt + kc_s, kc_buf);" in out
    assert out.count("kc_stream64(out_bt") == 1  # the serial copy is left alone
    assert out.count("kc_stream_fence();") == 1
    assert apply_transform("stream_stores", out) is None  # once
    rng = np.random.default_rng(3)
    for name, t in (("before", threaded), ("after", out)):
        t = t.replace("#define OMP_MIN_WORK 1048576", "#define OMP_MIN_WORK 1")
        lib = build(t, tmp_path, name)
        for b, tt, c, v in ((1, 1, 1, 1), (2, 3, 5, 7), (3, 31, 999, 50), (2, 16, 768, 9)):
            inp = rng.integers(0, v, b * tt).astype(np.int32)
            wte = rng.standard_normal(v * c).astype(np.float32)
            wpe = rng.standard_normal(tt * c).astype(np.float32)
            o = np.full(b * tt * c + 3, np.nan, np.float32)
            view = o[1:1 + b * tt * c]  # an output that starts off the 64-byte grid
            lib.embedding(ptr(inp), ptr(wte), ptr(wpe), ptr(view), ctypes.c_long(b),
                          ctypes.c_long(tt), ctypes.c_long(c), ctypes.c_long(v))
            want = (wte.reshape(v, c)[inp] + np.tile(wpe.reshape(tt, c), (b, 1))).ravel()
            assert np.array_equal(view, want), (name, b, tt, c)
            assert np.isnan(o[0]) and np.isnan(o[-2:]).all()  # nothing written outside


SCALE_ROWS = kernel("""
#define SCALE(v, s) ((v) * (s) + 1.0)

extern "C" void f(const double* a, const double* s, double* y, size_t rows, size_t cols) {
#pragma omp parallel for
    for (size_t r = 0; r < rows; r++) {
        double* yr = &y[r * cols];
        const double* ar = a + r * cols;
        for (size_t j = 0; j < cols; ++j)
            yr[j] = SCALE(ar[j], s[r]);
    }
}
""", flags="[-O2, -fopenmp]")


def test_double_rows_under_an_existing_pragma_bit_for_bit(tmp_path):
    out = apply_transform("stream_stores", SCALE_ROWS)
    assert out is not None and "alignas(64) double kc_buf[8];" in out
    assert "const size_t j = kc_s + kc_k;" in out
    rng = np.random.default_rng(4)
    libs = [build(t, tmp_path, name) for name, t in (("before", SCALE_ROWS), ("after", out))]
    for rows, cols in ((1, 1), (3, 7), (5, 33), (64, 1000)):
        a = rng.standard_normal(rows * cols)
        s = rng.standard_normal(rows)
        ys = []
        for lib in libs:
            y = np.full(rows * cols + 1, np.nan)
            lib.f(ptr(a), ptr(s), ptr(y[1:]), ctypes.c_size_t(rows), ctypes.c_size_t(cols))
            ys.append(y[1:])
        want = a.reshape(rows, cols) * s[:, None] + 1.0
        assert np.allclose(ys[0], want.ravel(), rtol=1e-12, atol=1e-14), (rows, cols)
        assert np.array_equal(ys[0], ys[1]), (rows, cols)  # the same code, bit for bit


@pytest.mark.parametrize("body, why", [
    # the output is read back in the same function: it should stay in cache
    ("""
extern "C" void f(const float* x, float* y, float* t, int rows, int cols) {
#pragma omp parallel for
    for (int r = 0; r < rows; r++) {
        float* yr = y + r * cols;
        for (int j = 0; j < cols; j++) yr[j] = 2.0f * x[r * cols + j];
        float s = 0;
        for (int j = 0; j < cols; j++) s += yr[j];
        t[r] = s;
    }
}""", "yr is read"),
    # passed on to a helper, which may read it
    ("""
void use(float* p, int n);
extern "C" void f(const float* x, float* y, int rows, int cols) {
#pragma omp parallel for
    for (int r = 0; r < rows; r++) {
        float* yr = y + r * cols;
        for (int j = 0; j < cols; j++) yr[j] = x[r * cols + j] + 1.0f;
        use(yr, cols);
    }
}""", "yr is read"),
    # the row pointer is write-only, but the buffer it points into is read back
    ("""
extern "C" void f(const float* x, float* y, float* t, int rows, int cols) {
#pragma omp parallel for
    for (int r = 0; r < rows; r++) {
        float* yr = y + r * cols;
        for (int j = 0; j < cols; j++) yr[j] = 2.0f * x[r * cols + j];
        t[r] = y[r * cols];
    }
}""", "y (which yr points into) is read"),
    # updated in place: the old value is read
    ("""
extern "C" void f(const float* x, float* y, int rows, int cols) {
#pragma omp parallel for
    for (int r = 0; r < rows; r++)
        for (int j = 0; j < cols; j++) y[r * cols + j] += x[r * cols + j];
}""", "not one store"),
    # a flat loop: its threading matters more, and this form would keep it serial
    ("""
extern "C" void f(const float* x, float* y, int n) {
#pragma omp parallel for
    for (int i = 0; i < n; i++) y[i] = x[i] * x[i];
}""", "flat loop"),
    # serial: the nest was left serial, its output may be small enough for the cache
    ("""
extern "C" void f(const float* x, float* y, int rows, int cols) {
    for (int r = 0; r < rows; r++) {
        float* yr = y + r * cols;
        for (int j = 0; j < cols; j++) yr[j] = x[r * cols + j] + (float)r;
        if (rows > 3) break;  // not threadable as written
    }
}""", "not in a threaded loop nest"),
])
def test_not_offered_where_it_would_be_wrong_or_lose(body, why):
    text = kernel(body, flags="[-O2, -fopenmp]")
    assert apply_transform("stream_stores", text) is None
    reasons = " ".join(stream_reasons(parse_any(text).body, "f"))
    assert why in reasons, reasons


def test_the_memory_access_specialist_offers_it_once_threaded():
    threaded = _threaded(baseline_text("embedding"))
    kinds = [p.change.kind for p in MemoryAccess().propose(_library_ctx("embedding", threaded))]
    assert "stream_stores" in kinds
    kinds = [p.change.kind for p in MemoryAccess().propose(_library_ctx("embedding"))]
    assert "stream_stores" not in kinds
