"""Keep a recomputed value: a pure call that a later loop over the same range makes again is
computed once into a row buffer. Pinned on sources in several styles (a three-pass softmax
with libm's exp, an attention row through a dot-product helper and row pointers, the
library's attention), each compiled and compared with a float64 reference on both sides of
the buffer's length, and on the forms where the move would be wrong: the second pass writes
what the call reads (in place, or through a row pointer), a helper that writes memory, a call
under a test, an argument changed between the passes."""

from __future__ import annotations

import ctypes

import numpy as np
import pytest

from kernelcrew.agents.transforms import apply_transform
from kernelcrew.agents.transforms.catalogue import not_applicable
from kernelcrew.agents.transforms.cpu.keep_values import MARK, keep_reasons, keep_values
from tests.agents.test_reach import build, kernel, ptr
from tests.agents.test_specialists import all_proposals, ctx_for

# softmax as three passes, exp recomputed in the last one; `int` counters, a `long` size
SOFTMAX = """
extern "C" void f(const float* x, float* y, long n_) {
    int n = (int)n_;
    float mx = -INFINITY;
    for (int i = 0; i < n; i++) mx = fmaxf(mx, x[i]);
    float sum = 0.0f;
    for (int i = 0; i < n; i++) {
        sum += expf(x[i] - mx);
    }
    for (int i = 0; i < n; i++) {
        y[i] = expf(x[i] - mx) / sum;
    }
}
"""

# one attention row: a static helper for the dot product, each key reached through a row
# pointer declared at the top of each pass, the scaled score recomputed to exponentiate it
ROW = """
static float dot(const float *a, const float *b, int n) {
    float s = 0.0f;
    for (int i = 0; i < n; i++) s += a[i] * b[i];
    return s;
}

extern "C" void f(const float *q, const float *k, const float *v, float *o, long T_, long D_) {
    int T = (int)T_, D = (int)D_;
    float m = -1e30f;
    for (int s = 0; s < T; ++s) {
        const float *kr = k + (long)s * D;
        float sc = dot(q, kr, D) * 0.5f;
        if (sc > m) m = sc;
    }
    for (int d = 0; d < D; ++d) o[d] = 0.0f;
    float z = 0.0f;
    for (int s = 0; s < T; ++s) {
        const float *kr = k + (long)s * D;
        float p = expf(dot(q, kr, D) * 0.5f - m);
        z += p;
        for (int d = 0; d < D; ++d) o[d] += p * v[(long)s * D + d];
    }
    for (int d = 0; d < D; ++d) o[d] /= z;
}
"""


def softmax_ref(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max())
    return e / e.sum()


def test_softmax_keeps_exp_across_passes(tmp_path):
    text = apply_transform("keep_values", kernel(SOFTMAX))
    assert text is not None and MARK in text
    assert "float kc_keep[8192];" in text
    assert text.count("expf(") == 3  # once in the kept version, twice in the one as it was
    lib, old = build(text, tmp_path, "new"), build(kernel(SOFTMAX), tmp_path, "old")
    rng = np.random.default_rng(5)
    # empty, one, short, and past the buffer (the code as it was runs)
    for n in (0, 1, 37, 8192, 9000):
        x = rng.standard_normal(n).astype(np.float32)
        outs = []
        for fn in (lib.f, old.f):
            y = np.full(n, np.nan, np.float32)
            fn(ptr(x), ptr(y), ctypes.c_long(n))
            outs.append(y)
        if n:
            assert np.allclose(outs[0], softmax_ref(x.astype(np.float64)), rtol=1e-5,
                               atol=1e-7), n
        # the same values in the same order: the two builds agree to the last bit
        assert np.array_equal(outs[0], outs[1]), n


def test_attention_row_through_a_helper_and_row_pointers(tmp_path):
    text = apply_transform("keep_values", kernel(ROW))
    assert text is not None and MARK in text
    kept = text.split(MARK)[1].split("} else {")[0]
    assert kept.count("dot(") == 1  # the second pass reads the buffer
    # the exp opens the second pass: it runs first, on its own, as a simd loop
    assert "#pragma omp simd" in kept and "kc_keep[s] = expf(kc_keep[s] * 0.5f - m);" in kept
    assert "float p = kc_keep[s];" in kept
    # and vectorizes once the vector math move has replaced expf
    both = apply_transform("vector_math", text)
    assert both is not None and "kc_expf(kc_keep[s] * 0.5f - m)" in both
    rng = np.random.default_rng(6)
    for name, t in (("keep", text), ("keep_vm", both)):
        lib = build(t, tmp_path, name)
        for T, D in ((1, 1), (3, 5), (97, 33), (300, 17)):
            q = rng.standard_normal(D).astype(np.float32)
            k = rng.standard_normal((T, D)).astype(np.float32)
            v = rng.standard_normal((T, D)).astype(np.float32)
            o = np.full(D, np.nan, np.float32)
            lib.f(ptr(q), ptr(k), ptr(v), ptr(o), ctypes.c_long(T), ctypes.c_long(D))
            qd, kd, vd = (a.astype(np.float64) for a in (q, k, v))
            ref = softmax_ref(kd @ qd * 0.5) @ vd
            assert np.allclose(o, ref, rtol=1e-4, atol=1e-5), (name, T, D)


def test_library_attention_is_proposed_and_correct(small_ops, tmp_path):
    from kernelcrew.tools.judge.check import check
    from tests.agents.conftest import QUICK, baseline_text

    ctx = ctx_for("attention")
    props = [p for p in all_proposals(ctx) if p.change.kind == "keep_values"]
    assert props and props[0].author == "loop"
    text = apply_transform("keep_values", baseline_text("attention"))
    assert text is not None and MARK in text
    assert text.count("#pragma omp parallel for") == 1  # the source's own pragma, once
    path = tmp_path / "attention-keep.cpp"
    path.write_text(text)
    res = check(str(small_ops("attention")), str(path), "cpu", bench=QUICK)
    assert res.correct, res.reason


WRONG = {
    # in place: the last pass overwrites the array the call reads
    "in place": (SOFTMAX.replace("const float* x, float* y", "float* x, float* y")
                 .replace("y[i] = expf(x[i] - mx) / sum;", "x[i] = expf(x[i] - mx) / sum;"),
                 "reads a buffer that the passes write"),
    # the same through a row pointer to the output: the helper reads what the pass writes
    "through a row pointer": (ROW.replace("const float *k,", "float *k,")
                              .replace("for (int d = 0; d < D; ++d) o[d] += p * v[",
                                       "float *w = k + (long)s * D;\n"
                                       "        w[0] = p;\n"
                                       "        for (int d = 0; d < D; ++d) o[d] += p * v["),
                              "reads a buffer that the passes write"),
    # a helper that stores through its pointer is not a value to keep
    "impure helper": (ROW.replace("    return s;\n}", "    ((float *)a)[0] = s;\n    return s;\n}"),
                      None),
    # the call runs only for some iterations of the first pass
    "under a test": (SOFTMAX.replace("        sum += expf(x[i] - mx);",
                                     "        if (x[i] > 0.0f) sum += expf(x[i] - mx);"),
                     "does not run on every iteration"),
    # an argument changes between the passes: the second call computes another value
    "argument changed": (SOFTMAX.replace("    for (int i = 0; i < n; i++) {\n        y[i]",
                                         "    mx = mx - 1.0f;\n"
                                         "    for (int i = 0; i < n; i++) {\n        y[i]"),
                         None),
    # the passes cover different ranges
    "other range": (SOFTMAX.replace("for (int i = 0; i < n; i++) {\n        y[i]",
                                    "for (int i = 1; i < n; i++) {\n        y[i]"), None),
    # the bound changes between the passes: the same text, another range
    "bound changed": (SOFTMAX.replace("    for (int i = 0; i < n; i++) {\n        y[i]",
                                      "    n = n + 1;\n"
                                      "    for (int i = 0; i < n; i++) {\n        y[i]"),
                      "changes between them"),
    # the first pass leaves early
    "early exit": (SOFTMAX.replace("        sum += expf(x[i] - mx);",
                                   "        sum += expf(x[i] - mx);\n"
                                   "        if (sum > 1e30f) break;"),
                   "does not run on every iteration"),
}


@pytest.mark.parametrize("case", sorted(WRONG))
def test_not_offered_where_wrong(case):
    src, why = WRONG[case]
    assert keep_values(src, "f") is None
    if why is not None:
        reasons = keep_reasons(src, "f")
        assert any(why in r for r in reasons), reasons


def test_the_catalogue_says_why_not():
    why = not_applicable(kernel(WRONG["in place"][0]))
    assert "reads a buffer that the passes write" in why["keep_values"]
    plain = not_applicable(kernel("extern \"C\" void f(float* y, long n) "
                                  "{ for (long i = 0; i < n; i++) y[i] = 1.0f; }"))
    assert "computes again" in plain["keep_values"]
