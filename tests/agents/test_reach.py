"""The transformations on code written the way real C is written: the work in a `static`
helper the entry calls, `int` counters, rows reached through pointers, casts, pragmas
already there, macros, pointers without const or restrict. Each move is pinned on small
sources in these styles, run against NumPy where it applies, and shown refused where it
would be wrong (a scan, a loop-carried dependence, buffers that overlap through a helper).

The snippets are compiled with -march=native and run here; nothing depends on the vector
width, so they hold on AVX2 and AVX-512 machines alike."""

from __future__ import annotations

import ctypes
import re
import subprocess

import numpy as np
import pytest

from kernelcrew.agents.transforms import apply_transform, parse_any
from kernelcrew.agents.transforms.analysis.scope import scope_of
from kernelcrew.agents.transforms.catalogue import not_applicable
from kernelcrew.agents.transforms.cpu.unroll_and_jam import jam_reasons, unroll_and_jam
from kernelcrew.csource.syntax import Source, find_function, pragma_text, walk


def kernel(body: str, entry: str = "f", flags: str = "[-O2]") -> str:
    return f"/* kernelcrew\nentry: {entry}\nflags: {flags}\n*/\n#include <math.h>\n" \
           f"#include <stddef.h>\n#include <stdint.h>\n{body}"


def pragmas(text: str) -> list[str]:
    s = Source(parse_any(text).body)
    return [pragma_text(s, n) for n in walk(s.root) if n.type == "preproc_call"
            and pragma_text(s, n).startswith("omp")]


def build(text: str, tmp_path, name: str = "k"):
    """Compile a kernel file's body with its flags (plus -O3 -march=native) into a library."""
    kf = parse_any(text)
    src = tmp_path / f"{name}.cpp"
    src.write_text(kf.body)
    lib = tmp_path / f"{name}.so"
    subprocess.run(["g++", "-std=c++17", "-O3", "-march=native", *kf.meta.flags, "-shared",
                    "-fPIC", str(src), "-o", str(lib)], check=True, capture_output=True)
    return ctypes.CDLL(str(lib))


def ptr(a: np.ndarray) -> ctypes.c_void_p:
    return ctypes.c_void_p(a.ctypes.data)


# ---------------------------------------------------------------- helpers in reach

GELU = kernel("""
#define GELU_K sqrtf(2.0f / (float)M_PI)

static void gelu_fwd(float* out, float* inp, int N) {
    for (int i = 0; i < N; i++) {
        float x = inp[i];
        float cube = 0.044715f * x * x * x;
        out[i] = 0.5f * x * (1.0f + tanhf(GELU_K * (x + cube)));
    }
}

extern "C" void f(const float* x, float* y, int64_t n) {
    gelu_fwd(y, (float*)x, (int)n);
}
""")


def test_a_static_helper_called_with_distinct_buffers_is_in_reach():
    sc = scope_of(Source(parse_any(GELU).body), "f")
    assert sc.functions == ["f", "gelu_fwd"] and not sc.excluded
    out = apply_transform("omp_parallel", GELU)
    assert out is not None and "omp parallel for" in " ".join(pragmas(out))
    assert "__restrict__ out" in apply_transform("restrict", GELU)


def test_tanh_in_a_helper_is_replaced_and_stays_accurate(tmp_path):
    text = GELU
    for name in ("vector_math_ext", "simd", "omp_parallel"):
        text = apply_transform(name, text) or text
    assert "kc_tanh1pf(GELU_K" in text and "omp simd" in " ".join(pragmas(text))
    lib = build(text, tmp_path)
    x = np.random.default_rng(1).standard_normal(2_000_003).astype(np.float32) * 3
    y = np.empty_like(x)
    lib.f(ptr(x), ptr(y), ctypes.c_int64(x.size))
    xd = x.astype(np.float64)
    ref = 0.5 * xd * (1 + np.tanh(np.sqrt(2 / np.pi) * (xd + 0.044715 * xd ** 3)))
    assert np.allclose(y, ref, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("call", ["shift(y, y, n - 1)", "shift((float*)x, (float*)x + 1, n - 1)"])
def test_a_helper_called_with_overlapping_buffers_is_out_of_reach(call):
    """In place (y, y) or shifted (x, x + 1): the helper's loop is a recurrence through the
    alias, so nothing that reorders it may be offered, and the reason is given."""
    text = kernel(f"""
static void shift(float* dst, float* src, int n) {{
    for (int i = 0; i < n; i++) {{
        dst[i + 1] = src[i] * 0.5f;
    }}
}}
extern "C" void f(const float* x, float* y, int64_t n) {{
    {call};
}}
""")
    sc = scope_of(Source(parse_any(text).body), "f")
    assert sc.functions == ["f"] and "shift" in sc.excluded
    assert "may overlap" in sc.excluded["shift"] or "twice" in sc.excluded["shift"]
    for name in ("omp_parallel", "simd", "unroll_and_jam"):
        assert apply_transform(name, text) is None, name
    # the entry's own buffers are distinct (the harness), the helper's are not
    assert "shift(float* dst, float* src" in apply_transform("restrict", text)
    assert "out of reach" in not_applicable(text)["scope"]


def test_a_helper_whose_address_is_taken_is_out_of_reach():
    text = kernel("""
static void scale(float* y, float* x, int n) { for (int i = 0; i < n; i++) y[i] = 2 * x[i]; }
typedef void (*fn_t)(float*, float*, int);
extern "C" void f(const float* x, float* y, int64_t n) {
    fn_t g = scale;
    g(y, (float*)x, (int)n);
    scale(y, (float*)x, (int)n);
}
""")
    sc = scope_of(Source(parse_any(text).body), "f")
    assert "scale" in sc.excluded and "address" in sc.excluded["scale"]


def test_a_loop_calling_a_helper_that_writes_memory_is_not_threaded():
    text = kernel("""
static float bump(float v) { static float last = 0.0f; last = last + v; return last; }
extern "C" void f(const float* x, float* y, int64_t n) {
    for (int i = 0; i < n; i++) y[i] = bump(x[i]);
}
""")
    assert apply_transform("omp_parallel", text) is None
    assert apply_transform("simd", text) is None
    assert "bump" in not_applicable(text)["omp_parallel"]


# ---------------------------------------------------------------- int counters, row pointers

LAYERNORM = kernel("""
static void ln_fwd(float* out, float* mean, float* rstd, float* inp, float* weight,
                   float* bias, int B, int T, int C) {
    float eps = 1e-5f;
    for (int b = 0; b < B; b++) {
        for (int t = 0; t < T; t++) {
            float* x = inp + b * T * C + t * C;
            float m = 0.0f;
            for (int i = 0; i < C; i++) {
                m += x[i];
            }
            m = m / C;
            float v = 0.0f;
            for (int i = 0; i < C; i++) {
                float d = x[i] - m;
                v += d * d;
            }
            v = v / C;
            float s = 1.0f / sqrtf(v + eps);
            float* o = out + b * T * C + t * C;
            for (int i = 0; i < C; i++) {
                o[i] = (s * (x[i] - m)) * weight[i] + bias[i];
            }
            mean[b * T + t] = m;
            rstd[b * T + t] = s;
        }
    }
}
extern "C" void f(const float* x, const float* w, const float* b, float* y, float* mean,
                  float* rstd, int64_t B, int64_t T, int64_t C) {
    ln_fwd(y, mean, rstd, (float*)x, (float*)w, (float*)b, (int)B, (int)T, (int)C);
}
""")


def test_row_pointers_and_int_counters_thread_both_outer_loops_and_vectorize(tmp_path):
    text = LAYERNORM
    for name in ("omp_parallel", "simd", "restrict"):
        new = apply_transform(name, text)
        assert new is not None, name
        text = new
    ps = pragmas(text)
    assert "omp parallel for collapse(2) schedule(static)" in ps  # B = 3 still feeds 2 cores
    assert ps.count("omp simd reduction(+ : m)") == 2  # threaded and serial copies
    assert "(long long)B * T * C >= OMP_MIN_WORK" in text  # int sizes: no overflow
    lib = build(text, tmp_path)
    rng = np.random.default_rng(2)
    for B, T, C in ((3, 400, 1001), (1, 1, 1), (2, 3, 17)):
        x = rng.standard_normal((B, T, C)).astype(np.float32)
        w, bias = rng.standard_normal(C).astype(np.float32), rng.standard_normal(C).astype(
            np.float32)
        y = np.empty_like(x)
        mean = np.empty((B, T), np.float32)
        rstd = np.empty((B, T), np.float32)
        lib.f(ptr(x), ptr(w), ptr(bias), ptr(y), ptr(mean), ptr(rstd), ctypes.c_int64(B),
              ctypes.c_int64(T), ctypes.c_int64(C))
        xd = x.astype(np.float64)
        m = xd.mean(-1)
        r = 1 / np.sqrt(((xd - m[..., None]) ** 2).mean(-1) + 1e-5)
        assert np.allclose(mean, m, atol=1e-5) and np.allclose(rstd, r, rtol=1e-4)
        assert np.allclose(y, (xd - m[..., None]) * r[..., None] * w + bias, rtol=1e-4,
                           atol=1e-4)


def test_sizes_narrowed_into_int_locals_still_prove_rows_distinct():
    """`int B = (int)B_, T = (int)T_;` then `mean[b * T + t]`: the t loop is bounded by
    T (read through its initializer as T_), the subscript weighs b by T; both name the
    same size, so each (b, t) writes its own element and both loops are threaded. With
    the bound one larger, rows of b would overlap: b is not threaded."""
    src = kernel("""
extern "C" void f(const float* x, float* mean, int64_t B_, int64_t T_, int64_t C_) {
    int B = (int)B_, T = (int)T_, C = (int)C_;
    for (int b = 0; b < B; b++) {
        for (int t = 0; t < T; t++) {
            const float* row = x + (int64_t)b * T * C + (int64_t)t * C;
            float m = 0.0f;
            for (int i = 0; i < C; i++) m += row[i];
            mean[b * T + t] = m / C;
        }
    }
}
""")
    new = apply_transform("omp_parallel", src)
    assert new is not None and "omp parallel for collapse(2) schedule(static)" in pragmas(new)
    overlapping = apply_transform("omp_parallel", src.replace("t < T;", "t <= T;"))
    assert overlapping is None or "collapse" not in overlapping and \
        overlapping.index("omp parallel for") > overlapping.index("for (int b")


# ---------------------------------------------------------------- pragmas already there

MATMUL = kernel("""
static void mm_naive(float* out, const float* inp, const float* weight, const float* bias,
                     int B, int T, int C, int OC) {
    #pragma omp parallel for collapse(2)
    for (int b = 0; b < B; b++) {
        for (int t = 0; t < T; t++) {
            int bt = b * T + t;
            for (int o = 0; o < OC; o++) {
                float val = (bias != NULL) ? bias[o] : 0.0f;
                for (int i = 0; i < C; i++) {
                    val += inp[bt * C + i] * weight[o * C + i];
                }
                out[bt * OC + o] = val;
            }
        }
    }
}
extern "C" void f(const float* inp, const float* weight, const float* bias, float* out,
                  int64_t B, int64_t T, int64_t C, int64_t OC) {
    mm_naive(out, inp, weight, bias, (int)B, (int)T, (int)C, (int)OC);
}
""", flags="[-O2, -fopenmp]")


def test_an_existing_parallel_pragma_is_kept_and_never_stacked():
    assert apply_transform("omp_parallel", MATMUL) is None
    assert "threaded already" in not_applicable(MATMUL)["omp_parallel"]
    text = apply_transform("simd", MATMUL)
    assert pragmas(text) == ["omp parallel for collapse(2)", "omp simd reduction(+ : val)"]


def test_an_existing_parallel_pragma_gets_a_serial_version_for_tiny_shapes(tmp_path):
    text = apply_transform("omp_version", MATMUL)
    assert text is not None and pragmas(text) == ["omp parallel for collapse(2)"]
    assert "if ((long long)B * T * OC * C >= OMP_MIN_WORK) {" in text
    assert parse_any(text).meta.knobs == {"OMP_MIN_WORK": 1 << 20}
    assert apply_transform("omp_version", text) is None  # once
    lib = build(text, tmp_path, "mmv")
    rng = np.random.default_rng(5)
    for B, T, C, OC in ((1, 1, 3, 2), (4, 64, 64, 80)):  # below and above the threshold
        x = rng.standard_normal((B, T, C)).astype(np.float32)
        w = rng.standard_normal((OC, C)).astype(np.float32)
        bias = rng.standard_normal(OC).astype(np.float32)
        out = np.empty((B, T, OC), np.float32)
        lib.f(ptr(x), ptr(w), ptr(bias), ptr(out), *(ctypes.c_int64(v) for v in (B, T, C, OC)))
        assert np.allclose(out, x.astype(np.float64) @ w.T + bias, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("factor", [4, 8])
def test_unroll_and_jam_of_a_dot_product_nest_keeps_the_tail(tmp_path, factor):
    text = apply_transform("unroll_and_jam", MATMUL, {"factor": factor})
    assert text is not None
    ps = pragmas(text)
    assert ps[0] == "omp parallel for collapse(2)" and len(ps) == 2  # one pragma, kept
    assert ps[1].startswith("omp simd reduction(+ : val, val_1")
    assert f"val_{factor - 1} +=" in text and f"val_{factor} " not in text
    lib = build(text, tmp_path, f"mm{factor}")
    rng = np.random.default_rng(3)
    for B, T, C, OC in ((2, 5, 37, 8 * factor + 3), (1, 1, 1, 1), (1, 3, 5, factor - 1)):
        x = rng.standard_normal((B, T, C)).astype(np.float32)
        w = rng.standard_normal((OC, C)).astype(np.float32)
        bias = rng.standard_normal(OC).astype(np.float32)
        out = np.empty((B, T, OC), np.float32)
        lib.f(ptr(x), ptr(w), ptr(bias), ptr(out), *(ctypes.c_int64(v) for v in (B, T, C, OC)))
        ref = x.astype(np.float64) @ w.T.astype(np.float64) + bias
        assert np.allclose(out, ref, rtol=1e-4, atol=1e-4)


def test_unroll_and_jam_is_refused_where_it_would_gather_or_collide():
    ijk = """
void f(const float* a, const float* b, float* c, int n, int k, int m) {
    for (int i = 0; i < n; i++)
        for (int j = 0; j < m; j++) {
            float s = 0.0f;
            for (int q = 0; q < k; q++) s += a[i * k + q] * b[q * m + j];
            c[i * m + j] = s;
        }
}"""
    assert unroll_and_jam(ijk, "f") is None
    assert any("strided" in r for r in jam_reasons(ijk, "f"))
    same_out = """
void f(const float* a, float* c, int n, int k) {
    for (int i = 0; i < n; i++) {
        float s = 0.0f;
        for (int q = 0; q < k; q++) s += a[i * k + q];
        c[0] = c[0] + s;
    }
}"""
    assert unroll_and_jam(same_out, "f") is None
    assert any("not independent" in r for r in jam_reasons(same_out, "f"))


# ---------------------------------------------------------------- multiple accumulators

@pytest.mark.parametrize("ways", [4, 8])
def test_accumulators_split_each_reduction_and_keep_the_rest(tmp_path, ways):
    text = apply_transform("accumulators", LAYERNORM, {"ways": ways})
    assert text is not None
    ps = pragmas(text)
    names = ", ".join(["m"] + [f"m_{k}" for k in range(1, ways)])
    assert f"omp simd reduction(+ : {names})" in ps  # the mean
    assert any(p.startswith("omp simd reduction(+ : v, v_1") for p in ps)  # the variance
    # each split loop and its tail (a short row runs whole there, as one simd chain); the
    # normalizing loop stores: not a reduction, left alone
    assert ps.count("omp simd reduction(+ : m)") == 1 and len(ps) == 4
    assert f">= {ways * 64} ?" in text  # rows under 64 elements per part are not split
    # on top of `simd` (the merge's order) the loop's own simd pragma gives way: no pragma
    # is stacked on another
    on_simd = apply_transform("accumulators", apply_transform("simd", LAYERNORM),
                              {"ways": ways})
    assert on_simd is not None and f"omp simd reduction(+ : {names})" in pragmas(on_simd)
    assert pragmas(on_simd).count("omp simd reduction(+ : m)") == 1
    assert not re.search(r"#pragma omp simd[^\n]*\n\s*#pragma omp simd", on_simd)
    lib = build(text, tmp_path, f"ln{ways}")
    rng = np.random.default_rng(4)
    for B, T, C in ((2, 3, 4 * ways + 3), (1, 1, 1), (1, 2, ways - 1), (1, 5, 1000)):
        x = rng.standard_normal((B, T, C)).astype(np.float32) + 3
        w, bias = np.ones(C, np.float32), np.zeros(C, np.float32)
        y = np.empty_like(x)
        mean, rstd = np.empty((B, T), np.float32), np.empty((B, T), np.float32)
        lib.f(ptr(x), ptr(w), ptr(bias), ptr(y), ptr(mean), ptr(rstd), ctypes.c_int64(B),
              ctypes.c_int64(T), ctypes.c_int64(C))
        xd = x.astype(np.float64)
        assert np.allclose(mean, xd.mean(-1), rtol=1e-5)
        assert np.allclose(rstd, 1 / np.sqrt(xd.var(-1) + 1e-5), rtol=1e-4)


def test_accumulators_take_max_reductions_and_refuse_stores():
    text = kernel("""
extern "C" void f(const float* x, float* y, int64_t n) {
    float mx = -INFINITY;
    for (int i = 0; i < n; i++) mx = fmaxf(mx, x[i]);
    for (int i = 0; i < n; i++) y[i] = x[i] - mx;
}
""")
    out = apply_transform("accumulators", text)
    assert out is not None and "reduction(max : mx, mx_1, mx_2, mx_3)" in out
    assert "mx = mx_1 > mx ? mx_1 : mx;" in out
    assert "also stores" in not_applicable(out)["accumulators"] or \
        "no reduction" in not_applicable(out)["accumulators"]


# ---------------------------------------------------------------- padded rows, braced if-max

# rows of `stride` floats of which the first `n` are live, as a padded vocabulary is stored;
# the running maximum written `if (...) { m = ...; }`, braces and all; the rows threaded
# by the source's own pragma
PADDED = kernel("""
static void row_softmax(float* dst, float* src, int rows, int n, int stride) {
    #pragma omp parallel for
    for (int r = 0; r < rows; r++) {
        float* in = src + r * stride;
        float* out = dst + r * stride;
        float m = -1e30f;
        for (int i = 0; i < n; i++) {
            if (in[i] > m) {
                m = in[i];
            }
        }
        float total = 0.0f;
        for (int i = 0; i < n; i++) {
            out[i] = expf(in[i] - m);
            total += out[i];
        }
        for (int i = 0; i < n; i++) {
            out[i] /= total;
        }
        for (int i = n; i < stride; i++) {
            out[i] = 0.0f;
        }
    }
}
extern "C" void f(const float* x, float* y, int64_t rows, int64_t n, int64_t stride) {
    row_softmax(y, (float*)x, (int)rows, (int)n, (int)stride);
}
""", flags="[-O2, -fopenmp]")


def test_inner_loops_of_padded_rows_vectorize_and_a_braced_if_max_is_a_reduction(tmp_path):
    """The row loop's iterations are not provably disjoint (n < stride is not known), but
    an inner loop runs with its row fixed: its own counter is all that must be one-to-one.
    `if (x > m) { m = x; }` is the max reduction it reads as."""
    text = apply_transform("simd", PADDED)
    assert text is not None
    ps = pragmas(text)
    assert "omp simd reduction(max : m)" in ps and "omp simd reduction(+ : total)" in ps
    assert ps.count("omp simd") == 2  # the division and the padding loops, plain
    assert "m = (in[i] > m) ? in[i] : m;" in text  # the if as a select, so it vectorizes
    acc = apply_transform("accumulators", text)
    assert acc is not None and "reduction(max : m, m_1" in acc  # the sum loop also stores
    assert apply_transform("omp_parallel", PADDED) is None  # threaded already, never stacked
    rng = np.random.default_rng(5)
    for variant, name in ((text, "simd"), (acc, "acc")):
        lib = build(variant, tmp_path, f"padded_{name}")
        for rows, n, stride in ((7, 1001, 1008), (1, 1, 1), (3, 5, 9), (2, 300, 300)):
            x = rng.standard_normal((rows, stride)).astype(np.float32) * 4
            y = np.full((rows, stride), np.nan, np.float32)
            lib.f(ptr(x), ptr(y), ctypes.c_int64(rows), ctypes.c_int64(n),
                  ctypes.c_int64(stride))
            xd = x[:, :n].astype(np.float64)
            e = np.exp(xd - xd.max(-1, keepdims=True))
            assert np.allclose(y[:, :n], e / e.sum(-1, keepdims=True), rtol=1e-4, atol=1e-7)
            assert not y[:, n:].any()


@pytest.mark.parametrize("body", [
    # a recurrence along a row reached through a row pointer
    "float* row = y + r * n;\n        for (int i = 1; i < n; i++) row[i] = row[i - 1] * 0.5f + x[i];",
    # the row below read while this one is written, through two row pointers
    ("float* row = y + r * n;\n        float* below = y + (r + 1) * n;\n"
    "        for (int i = 0; i < n; i++) row[i] = below[i] + x[i];"),
    # a braced if that updates the maximum and something else
    ("float m = 0.0f;\n        for (int i = 0; i < n; i++) { if (x[i] > m) { m = x[i]; y[i] = m; } }\n"
    "        y[r] = m;"),
])
def test_a_fixed_row_does_not_hide_a_dependence_along_the_inner_loop(body):
    text = kernel("static void g(float* y, float* x, int rows, int n) {\n"
                  "    for (int r = 0; r < rows; r++) {\n"
                  f"        {body}\n"
                  "    }\n}\n"
                  "extern \"C\" void f(const float* x, float* y, int64_t rows, int64_t n) "
                  "{ g(y, (float*)x, (int)rows, (int)n); }\n")
    for name in ("simd", "accumulators", "omp_parallel"):
        assert apply_transform(name, text) is None, name


# ---------------------------------------------------------------- fixed-size 2D arrays

# rows of a fixed width, as numerical C declares them (`float a[NR][NC]`), of which the
# first rows x cols are used; the counters at the top
GRID = kernel("""
#define NR 64
#define NC 80
static void smooth(int rows, int cols, float out[NR][NC], float in[NR][NC], float w) {
    int i, j;
    for (i = 1; i < rows - 1; i++)
        for (j = 0; j < cols; j++)
            out[i][j] = w * in[i][j] + (1.0f - w) * 0.5f * (in[i - 1][j] + in[i + 1][j]);
}
extern "C" void f(const float* x, float* y, float w, int64_t rows, int64_t cols) {
    smooth((int)rows, (int)cols, reinterpret_cast<float (*)[NC]>(y),
           reinterpret_cast<float (*)[NC]>(const_cast<float*>(x)), w);
}
""")


def test_two_dimensional_array_parameters_are_rows_of_their_declared_width(tmp_path):
    """`out[i][j]` of `float out[NR][NC]` is element i*NC + j, and j < NC holds wherever the
    access is in bounds: the rows are distinct whatever `cols` is, so the row loop is
    threaded and the column loop vectorized."""
    text = GRID
    for name in ("omp_parallel", "simd"):
        new = apply_transform(name, text)
        assert new is not None, name
        text = new
    ps = pragmas(text)
    assert ps[0].startswith("omp parallel for") and "omp simd" in ps
    assert "for (int i = 1; i < rows - 1; i++)" in text  # the row loop is the threaded one
    lib = build(text, tmp_path, "grid")
    rng = np.random.default_rng(6)
    for rows, cols in ((64, 80), (10, 7), (3, 1), (2, 80)):
        x = rng.standard_normal((64, 80)).astype(np.float32)
        y = np.zeros((64, 80), np.float32)
        lib.f(ptr(x), ptr(y), ctypes.c_float(0.25), ctypes.c_int64(rows), ctypes.c_int64(cols))
        xd = x.astype(np.float64)
        want = np.zeros((64, 80))
        want[1:rows - 1, :cols] = 0.25 * xd[1:rows - 1, :cols] + 0.375 * (
            xd[:rows - 2, :cols] + xd[2:rows, :cols])
        assert np.allclose(y, want, rtol=1e-5, atol=1e-6), (rows, cols)


@pytest.mark.parametrize("update, refused", [
    # each row from the one above it: the rows are a recurrence, the columns are not
    ("a[i][j] = a[i - 1][j] * 0.5f + b[i][j];", ("omp_parallel",)),
    # each column from the one before it: the other way round
    ("a[i][j] = a[i][j - 1] * 0.5f + b[i][j];", ("simd",)),
])
def test_a_recurrence_along_either_dimension_of_a_2d_array_is_kept(update, refused):
    text = kernel(f"""
#define N 32
static void rec(int n, float a[N][N], float b[N][N]) {{
    for (int i = 1; i < n; i++)
        for (int j = 1; j < n; j++)
            {update}
}}
extern "C" void f(const float* x, float* y, int64_t n) {{
    rec((int)n, reinterpret_cast<float (*)[N]>(y), reinterpret_cast<float (*)[N]>(
        const_cast<float*>(x)));
}}
""")
    for name in refused:
        out = apply_transform(name, text)
        if out is None:
            continue
        # only the other loop may take the move: threads on the columns, never the rows
        rows_header = out.split("rec(int n")[1].split("for (int j")[0]
        assert "omp parallel" not in rows_header if name == "omp_parallel" else \
            "omp simd" not in out, (name, out)


# ---------------------------------------------------------------- macros

def test_function_like_macros_without_side_effects_do_not_block_vectorization():
    text = kernel("""
#define SQ(a) ((a) * (a))
#define EPS 1e-6f
extern "C" void f(const float* x, float* y, int64_t n) {
    float s = 0.0f;
    for (int64_t i = 0; i < n; ++i) s += SQ(x[i]);
    y[0] = 1.0f / sqrtf(s + EPS);
}
""")
    out = apply_transform("simd", text)
    assert out is not None and "omp simd reduction(+ : s)" in pragmas(out)
    bumpy = text.replace("#define SQ(a) ((a) * (a))", "#define SQ(a) ((a) * (a)++)")
    assert apply_transform("simd", bumpy) is None


def test_indexing_macros_are_seen_through_and_a_recurrence_behind_one_is_not_threaded():
    """`V(i, j) = c * U(i, j)` through indexing macros: expanded as the preprocessor would,
    the writes are plain subscripts and the loops are threaded. A macro that reads the
    array being written (`AT(i - 1)` = y[i - 1]) hides a recurrence from a call-level view:
    it is not a pure call, and the expanded view shows the dependence."""
    text = kernel("""
#define U(i, j) u[(i) * nx + (j)]
#define V(i, j) v[(i) * nx + (j)]
extern "C" void f(const float* u, float* v, float c, int64_t ny_, int64_t nx_) {
    int ny = (int)ny_, nx = (int)nx_;
    for (int i = 0; i < ny; i++)
        for (int j = 0; j < nx; j++) V(i, j) = c * U(i, j);
}
""")
    new = apply_transform("omp_parallel", text)
    assert new is not None and "v[i * nx + j] = c * u[i * nx + j];" in new
    scan = kernel("""
#define AT(i) y[i]
extern "C" void f(float* y, int64_t n) {
    for (int64_t i = 1; i < n; i++) y[i] = AT(i - 1) + 1.0f;
}
""")
    for name in ("omp_parallel", "simd", "accumulators"):
        assert apply_transform(name, scan) is None, name


# ---------------------------------------------------------------- legality

@pytest.mark.parametrize("body", [
    # a scan: each element needs the one before
    "for (int i = 1; i < n; i++) y[i] = y[i - 1] + x[i];",
    # a recurrence through a scalar that is not a reduction
    "float acc = 0.0f;\n    for (int i = 0; i < n; i++) { acc = acc * 0.5f + x[i]; y[i] = acc; }",
    # a write every iteration shares, not a reduction (the last one wins)
    "for (int i = 0; i < n; i++) y[0] = x[i] * 2.0f;",
])
def test_moves_that_would_be_wrong_are_not_offered(body):
    text = kernel(f"static void g(float* y, float* x, int n) {{\n    {body}\n}}\n"
                  "extern \"C\" void f(const float* x, float* y, int64_t n) "
                  "{ g(y, (float*)x, (int)n); }\n")
    for name in ("omp_parallel", "simd", "unroll_and_jam", "accumulators"):
        assert apply_transform(name, text) is None, name
    why = not_applicable(text)
    assert why["omp_parallel"].startswith("g(): ") and why["simd"].startswith("g(): ")


def test_every_move_that_does_not_apply_says_why():
    why = not_applicable(MATMUL)
    assert "omp_parallel" in why and "vector_math" in why and "tile" in why
    assert all(isinstance(v, str) and len(v) > 10 for v in why.values())
    assert "simd" not in why and "unroll_and_jam" not in why  # both apply
    assert find_function(Source(parse_any(MATMUL).body), "mm_naive") is not None
