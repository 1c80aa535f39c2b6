"""Histogram / scatter-add privatization (`private_bins`): a loop that only accumulates into
an array of bins is threaded with a private copy of the bins per thread, the extent taken
from the op's shape; on small sources in several styles, each threaded result compiled and
compared with the serial one, and the loops where it would be wrong left alone, with the
reason."""

from __future__ import annotations

import subprocess

import pytest

from kernelcrew.agents.transforms import apply_transform, helper_extents
from kernelcrew.agents.transforms.cpu.private_bins import private_bins, scatter_plan
from kernelcrew.csource.affine import FunctionModel
from kernelcrew.csource.syntax import Source, find_function, pragma_text, walk

HEAD = "/* kernelcrew\nentry: histogram\nflags: [-O2]\n*/\n"


def kernel(body: str) -> str:
    return HEAD + "#include <cstring>\n#include <cstdint>\n" + body


def omp_pragmas(src: str) -> list[str]:
    s = Source(src)
    assert not s.has_errors(), src
    return [pragma_text(s, n) for n in walk(s.root) if n.type == "preproc_call"
            and pragma_text(s, n).startswith("omp")]


def reason(src: str, entry: str, extents: dict[str, str]) -> str:
    s = Source(src)
    m = FunctionModel(s, find_function(s, entry))
    out = [scatter_plan(m, lp, extents) for lp in m.loops]
    texts = [r for r in out if isinstance(r, str) and "accumulates into no array" not in r]
    assert texts and not any(isinstance(r, tuple) for r in out), out
    return texts[0]


MAIN = """
#include <cstdio>
int main() {
    const int64_t n = 300007, bins = 97;
    static int32_t values[300007];
    static float w[300007];
    static int32_t counts[97];
    static float sums[97];
    for (int64_t i = 0; i < n; ++i) {
        values[i] = (int32_t)((i * 7919 + (i >> 3) * 31) % bins);
        w[i] = (float)((i * 13) % 17) * 0.25f;
    }
    ENTRY_CALL;
    long long check = 0;
    double fsum = 0.0;
    for (int64_t b = 0; b < bins; ++b) { check += (long long)counts[b] * (b + 1);
                                         fsum += (double)sums[b] * (double)(b + 1); }
    std::printf("%lld %.1f\\n", check, fsum);
    return 0;
}
"""


def run(src: str, call: str, tmp_path, *flags: str) -> str:
    """Compile the kernel body with a main that calls it on 300007 values in 97 bins; the
    program prints a weighted checksum of the int and float bins."""
    body = src.split("*/\n", 1)[1] if src.startswith("/* kernelcrew") else src
    prog = tmp_path / "p.cpp"
    prog.write_text(body + MAIN.replace("ENTRY_CALL", call))
    exe = tmp_path / "p"
    subprocess.run(["g++", "-O2", "-fopenmp", *flags, str(prog), "-o", str(exe)], check=True,
                   capture_output=True, text=True)
    out = subprocess.run([str(exe)], capture_output=True, text=True, check=True,
                         env={"OMP_NUM_THREADS": "3", "PATH": "/usr/bin:/bin"})
    return out.stdout


# the library's style: memset, then one increment per value, a `long` counter
TEXTBOOK = kernel("""
extern "C" void histogram(const int32_t* values, int32_t* counts, int64_t n, int64_t bins) {
    memset(counts, 0, sizeof(int32_t) * (size_t)bins);
    for (long i = 0; i < n; i++) {
        counts[values[i]]++;
    }
}
""")

# real-world C: a static helper with `int` sizes and counters, a clearing loop, `+= 1`
HELPER = kernel("""
static void count_values(const int* v, int n, int* hist, int nbins) {
    for (int b = 0; b < nbins; b++) hist[b] = 0;
    for (int i = 0; i < n; i++) hist[v[i]] += 1;
}

extern "C" void histogram(const int32_t* values, int32_t* counts, int64_t n, int64_t bins) {
    count_values(values, (int)n, counts, (int)bins);
}
""")

# C89: the counter declared before the loop (its value after the loop is kept), a macro
# for the bin, the update written out as `b[e] = b[e] + 1`
C89_MACRO = kernel("""
#define BIN(x) ((x) % 97)
extern "C" void histogram(const int32_t* values, int32_t* counts, int64_t n, int64_t bins) {
    long i;
    memset(counts, 0, sizeof(int32_t) * (size_t)bins);
    for (i = 0; i < n; ++i)
        counts[BIN(values[i])] = counts[BIN(values[i])] + 1;
    counts[0] += (int32_t)(i - n);
}
""")

# scatter-add of float weights next to the counts, and a scalar total: reduction clauses
WEIGHTED = kernel("""
extern "C" void histogram(const int32_t* values, const float* w, int32_t* counts,
                          float* sums, int64_t n, int64_t bins) {
    memset(counts, 0, sizeof(int32_t) * (size_t)bins);
    memset(sums, 0, sizeof(float) * (size_t)bins);
    float total = 0.0f;
    for (int64_t i = 0; i < n; ++i) {
        const int32_t b = values[i];
        counts[b]++;
        sums[b] += w[i];
        total += w[i];
    }
    sums[0] += total * 0.0f;
}
""")


def test_the_textbook_histogram_gets_private_bins(tmp_path):
    out = apply_transform("private_bins", TEXTBOOK, {"extents": {"counts": "bins"}})
    assert out is not None
    assert omp_pragmas(out) == ["omp parallel for schedule(static) reduction(+ : counts[0:bins])"]
    assert "memset(counts, 0" in out  # the clearing stays, before the loop
    # the version test: enough work, enough values per bin, a copy that fits the stack
    assert ">= OMP_MIN_WORK" in out and ">= PRIVATE_PER_BIN * (long long)(bins)" in out
    assert "-fopenmp" in out.split("*/")[0] and "OMP_MIN_WORK: 1048576" in out
    call = "histogram(values, counts, n, bins)"
    serial = run(TEXTBOOK, call, tmp_path)
    assert run(out, call, tmp_path, "-DOMP_MIN_WORK=1") == serial  # threaded: same counts
    assert run(out, call, tmp_path) == serial  # below the threshold: the serial copy
    # few values per bin: the serial copy (the threaded one would clear more than it counts)
    few = run(out, call, tmp_path, "-DOMP_MIN_WORK=1", "-DPRIVATE_PER_BIN=100000")
    assert few == serial
    assert apply_transform("private_bins", out, {"extents": {"counts": "bins"}}) is None


def test_the_extent_must_be_known():
    assert apply_transform("private_bins", TEXTBOOK) is None
    assert apply_transform("private_bins", TEXTBOOK, {"extents": {"values": "n"}}) is None
    src = TEXTBOOK.split("*/\n", 1)[1]
    assert "extent of counts is not known" in reason(src, "histogram", {})


def test_a_helper_gets_the_extent_through_its_call(tmp_path):
    body = HELPER.split("*/\n", 1)[1]
    assert helper_extents(body, "histogram", "count_values", {"counts": "bins"}) == \
        {"hist": "nbins"}
    out = apply_transform("private_bins", HELPER, {"extents": {"counts": "bins"}})
    assert out is not None
    assert omp_pragmas(out) == ["omp parallel for schedule(static) reduction(+ : hist[0:nbins])"]
    call = "histogram(values, counts, n, bins)"
    assert run(out, call, tmp_path, "-DOMP_MIN_WORK=1") == run(HELPER, call, tmp_path)


def test_c89_counters_and_macros(tmp_path):
    out = apply_transform("private_bins", C89_MACRO, {"extents": {"counts": "bins"}})
    assert out is not None
    # the counter is declared outside the loop: its last value is kept
    assert omp_pragmas(out) == [
        "omp parallel for schedule(static) reduction(+ : counts[0:bins]) lastprivate(i)"]
    call = "histogram(values, counts, n, bins)"
    assert run(out, call, tmp_path, "-DOMP_MIN_WORK=1") == run(C89_MACRO, call, tmp_path)


def test_float_bins_and_scalar_sums_are_reduced_too(tmp_path):
    out = apply_transform("private_bins", WEIGHTED,
                          {"extents": {"counts": "bins", "sums": "bins"}})
    assert out is not None
    assert omp_pragmas(out) == [("omp parallel for schedule(static) reduction(+ : "
                                 "counts[0:bins], sums[0:bins]) reduction(+ : total)")]
    call = "histogram(values, w, counts, sums, n, bins)"
    serial = run(WEIGHTED, call, tmp_path).split()
    threaded = run(out, call, tmp_path, "-DOMP_MIN_WORK=1").split()
    assert threaded[0] == serial[0]  # the counts exactly
    # the float sums reassociated: quarters summed in float, close to the serial sums
    assert abs(float(threaded[1]) - float(serial[1])) <= 1e-4 * abs(float(serial[1]))


@pytest.mark.parametrize("body, why", [
    # the bins are read in the loop (a capped histogram): the private copies would not see
    # the other threads' counts
    ("""void h(const int* v, int* counts, long n, long bins) {
    for (long i = 0; i < n; i++)
        if (counts[v[i]] < 100) counts[v[i]]++;
}""", "read at line"),
    # `=` is not an accumulation
    ("""void h(const int* v, int* counts, long n, long bins) {
    for (long i = 0; i < n; i++) counts[v[i]] = 1;
}""", "not an accumulation"),
    # the index reads the bins
    ("""void h(const int* v, int* counts, long n, long bins) {
    for (long i = 0; i < n; i++) counts[counts[v[i]] % bins] += 1;
}""", "read"),
    # another loop-carried dependence: the previous value
    ("""void h(const int* v, int* counts, long n, long bins) {
    int prev = 0;
    for (long i = 0; i < n; i++) { counts[(v[i] + prev) % bins]++; prev = v[i]; }
}""", "prev"),
    # a float added to int bins rounds at every step, not once per private copy
    ("""void h(const int* v, const float* w, int* counts, long n, long bins) {
    for (long i = 0; i < n; i++) counts[v[i]] += w[i];
}""", "may not be an integer"),
    # the bins reached through a row pointer: a private copy of `counts` would not see it
    ("""void h(const int* v, int* counts, long n, long bins) {
    int* row = counts;
    for (long i = 0; i < n; i++) row[v[i]]++;
}""", "another pointer"),
    # a call that may write anything
    ("""void log_value(int);
void h(const int* v, int* counts, long n, long bins) {
    for (long i = 0; i < n; i++) { counts[v[i]]++; log_value(v[i]); }
}""", "side effects"),
])
def test_not_offered_where_it_would_be_wrong(body, why):
    assert private_bins(body, "h", extents={"counts": "bins"}) is None
    assert private_bins(body, "h", extents={"counts": "bins"}, copies=4) is None
    assert why in reason(body, "h", {"counts": "bins"})


def test_a_helper_that_aliases_its_bins_is_out_of_reach():
    src = kernel("""
static void add_counts(const int* v, int n, int* hist, int* other, int nbins) {
    for (int i = 0; i < n; i++) { hist[v[i]] += 1; other[i % nbins] = 0; }
}

extern "C" void histogram(const int32_t* values, int32_t* counts, int64_t n, int64_t bins) {
    add_counts(values, (int)n, counts, counts, (int)bins);
}
""")
    assert apply_transform("private_bins", src, {"extents": {"counts": "bins"}}) is None


def test_already_threaded_loops_are_left_alone():
    src = """void h(const int* v, int* counts, long n, long bins) {
#pragma omp parallel for
    for (long i = 0; i < n; i++) {
#pragma omp atomic
        counts[v[i]]++;
    }
}"""
    assert private_bins(src, "h", extents={"counts": "bins"}) is None
    assert "OpenMP" in reason(src, "h", {"counts": "bins"})


def test_one_to_one_writes_beside_the_bins_are_fine(tmp_path):
    src = """void h(const int* v, int* counts, int* copy, long n, long bins) {
#pragma GCC unroll 4
    for (long i = 0; i < n; i++) { copy[i] = v[i]; counts[v[i]]++; }
}"""
    out = private_bins(src, "h", extents={"counts": "bins"})
    assert out is not None
    assert omp_pragmas(out) == ["omp parallel for schedule(static) reduction(+ : counts[0:bins])"]
    assert out.count("#pragma GCC unroll 4") == 1  # the hint stays on the serial copy


def _library_ctx(op: str, kernel: str | None = None):
    from kernelcrew.agents.context import AgentContext
    from kernelcrew.graph.nodes.plan import extent
    from kernelcrew.kernels.signature import entry_params
    from kernelcrew.kernels.spec import load_op
    from tests.agents.conftest import baseline_text

    spec = load_op(op)
    return AgentContext(
        op=op, family=spec.family, description="", backend="cpu", signature="",
        tolerance="rtol=0, atol=0", kernel=kernel or baseline_text(op),
        entry_params=entry_params(spec),
        extents={n: extent(t.shape) for n, t in {**spec.inputs, **spec.outputs}.items()})


def test_the_loop_specialist_offers_private_bins_with_the_ops_extent():
    from kernelcrew.agents.heuristic.loop import Loop
    from kernelcrew.graph.nodes.plan import extent

    assert extent(["bins"]) == "bins" and extent(["rows", "n + 1"]) == "rows * (n + 1)"
    props = [p for p in Loop().propose(_library_ctx("histogram"))
             if p.change.kind == "private_bins"]
    assert len(props) == 1
    assert props[0].change.params == {"extents": {"values": "n", "counts": "bins"},
                                      "copies": 4}
    assert "reduction(+ : counts_copies[0:(size_t)(bins) * 4])" in props[0].change.kernel
    # the source may call the entry's parameters anything: they are matched by position
    renamed = baseline_text_renamed()
    props = [p for p in Loop().propose(_library_ctx("histogram", renamed))
             if p.change.kind == "private_bins"]
    assert props and "reduction(+ : hist_copies[0:(size_t)(nb) * 4])" in props[0].change.kernel


def baseline_text_renamed() -> str:
    from tests.agents.conftest import baseline_text

    return (baseline_text("histogram").replace("counts", "hist").replace("bins", "nb")
            .replace("values", "vals"))


# y = x A with A read along its rows, the way a row-major code adds scaled rows into the
# output: every row updates all n outputs, so the work is m * n updates, n bins
ROWS_INTO_Y = """
extern "C" void vecmat(const float* a, const float* x, float* y, long m_, long n_) {
    int m = (int)m_, n = (int)n_;
    for (int j = 0; j < n; j++) y[j] = 0.0f;
    for (int i = 0; i < m; i++) {
        const float* row = a + (long)i * n;
        float xi = x[i];
        for (int j = 0; j < n; j++) y[j] += row[j] * xi;
    }
}
"""


def test_rows_added_into_a_vector_count_every_update(tmp_path):
    text = HEAD.replace("histogram", "vecmat") + ROWS_INTO_Y
    out = apply_transform("private_bins", text, {"extents": {"y": "n"}})
    assert out is not None
    assert "omp parallel for schedule(static) reduction(+ : y[0:n])" in omp_pragmas(out)
    # the work of one run is rows times columns, not the row count alone: threads start
    # for a 2048 x 2048 product, and a copy of y pays once there are 8 rows per column
    assert "(long long)(m) * (long long)(n) >= OMP_MIN_WORK" in out
    assert "(long long)(m) * (long long)(n) >= PRIVATE_PER_BIN * (long long)(n)" in out
    check_vecmat(out, tmp_path, seed=7)


def check_vecmat(out: str, tmp_path, seed: int) -> None:
    """The transformed vecmat, threaded from one update (OMP_MIN_WORK=1) and as it is,
    against float64 on small, wide and tall shapes."""
    import ctypes

    import numpy as np

    from tests.agents.test_reach import build, ptr

    rng = np.random.default_rng(seed)
    threaded = out.replace("#define OMP_MIN_WORK 1048576", "#define OMP_MIN_WORK 1")
    assert threaded != out
    for name, t in (("threaded", threaded), ("serial", out)):
        lib = build(t, tmp_path, name)
        for m, n in ((1, 1), (9, 3), (64, 1000), (1003, 17)):
            a = rng.standard_normal((m, n)).astype(np.float32)
            x = rng.standard_normal(m).astype(np.float32)
            y = np.full(n, np.nan, np.float32)
            lib.vecmat(ptr(a), ptr(x), ptr(y), ctypes.c_long(m), ctypes.c_long(n))
            assert np.allclose(y, x.astype(np.float64) @ a.astype(np.float64), rtol=1e-4,
                               atol=1e-4), (name, m, n)


# interleaved copies: copy k of the unrolled body counts into copy k of the bins; the
# threaded run (OMP_MIN_WORK=1), the one-thread run (the default threshold, above the
# copies' own) and the loop as written (PRIVATE_MIN_WORK above n) give the same counts
COPIES_RUNS = (("-DOMP_MIN_WORK=1",), (), ("-DPRIVATE_MIN_WORK=100000000",))


def copies_pragma(out: str) -> str:
    got = [p for p in omp_pragmas(out) if "reduction" in p]
    assert len(got) == 1, got
    return got[0]


def test_interleaved_copies_of_the_textbook_bins(tmp_path):
    out = apply_transform("private_bins", TEXTBOOK, {"extents": {"counts": "bins"}, "copies": 4})
    assert out is not None and "private bins, 4 copies" in out
    assert copies_pragma(out) == ("omp parallel for schedule(static) reduction(+ : "
                                  "counts_copies[0:(size_t)(bins) * 4]) "
                                  "if ((long long)(n) >= OMP_MIN_WORK)")
    assert "(counts_copies + 3 * (long long)(bins))[values[(i + 3)]]++;" in out
    assert "#include <cstdlib>" in out and "free(counts_copies);" in out
    assert ">= PRIVATE_PER_BIN * 4 * (long long)(bins)" in out
    call = "histogram(values, counts, n, bins)"
    serial = run(TEXTBOOK, call, tmp_path)
    for flags in COPIES_RUNS:  # 300007 values: three left over by the unrolling
        assert run(out, call, tmp_path, *flags) == serial, flags
    assert apply_transform("private_bins", out, {"extents": {"counts": "bins"},
                                                  "copies": 4}) is None


def test_interleaved_copies_in_a_helper_with_int_counters(tmp_path):
    out = apply_transform("private_bins", HELPER, {"extents": {"counts": "bins"}, "copies": 4})
    assert out is not None
    assert "reduction(+ : hist_copies[0:(size_t)(nbins) * 4])" in copies_pragma(out)
    assert "for (int i = 0; i < i_jam; i += 4)" in out
    call = "histogram(values, counts, n, bins)"
    serial = run(HELPER, call, tmp_path)
    for flags in COPIES_RUNS:
        assert run(out, call, tmp_path, *flags) == serial, flags


def test_interleaved_copies_keep_a_c89_counters_last_value(tmp_path):
    # `counts[0] += i - n` after the loop: the leftover loop leaves i at n
    out = apply_transform("private_bins", C89_MACRO, {"extents": {"counts": "bins"},
                                                      "copies": 4})
    assert out is not None and "private bins, 4 copies" in out
    call = "histogram(values, counts, n, bins)"
    serial = run(C89_MACRO, call, tmp_path)
    for flags in COPIES_RUNS:
        assert run(out, call, tmp_path, *flags) == serial, flags


# real histograms skip values: a `continue` in copy k must end copy k only, not the rest
# of the unrolled group (braces instead of `do { } while (0)` would lose those counts)
SKIPPING = kernel("""
extern "C" void histogram(const int32_t* values, int32_t* counts, int64_t n, int64_t bins) {
    memset(counts, 0, sizeof(int32_t) * (size_t)bins);
    for (int64_t i = 0; i < n; ++i) {
        const int32_t v = values[i];
        if (v % 3 == 0) continue;
        for (int r = 0; r < 2; ++r) {
            if (r == 1 && v % 5 == 0) continue;  // the inner loop's own continue
            counts[v] += 1;
        }
    }
}
""")


def test_a_continue_ends_only_its_own_copy(tmp_path):
    out = apply_transform("private_bins", SKIPPING, {"extents": {"counts": "bins"}, "copies": 4})
    assert out is not None and out.count("} while (0);") == 4
    call = "histogram(values, counts, n, bins)"
    serial = run(SKIPPING, call, tmp_path)
    for flags in COPIES_RUNS:
        assert run(out, call, tmp_path, *flags) == serial, flags


FLOAT_BINS = kernel("""
extern "C" void histogram(const int32_t* values, const float* w, int32_t* counts,
                          float* sums, int64_t n, int64_t bins) {
    for (int64_t b = 0; b < bins; ++b) sums[b] = 0.0f;
    for (int64_t i = 0; i < n; ++i) sums[values[i]] += w[i];
}
""")


def test_interleaved_copies_of_float_bins_and_of_two_arrays(tmp_path):
    out = apply_transform("private_bins", FLOAT_BINS, {"extents": {"sums": "bins"}, "copies": 4})
    assert out is not None
    assert "reduction(+ : sums_copies[0:(size_t)(bins) * 4])" in copies_pragma(out)
    call = "histogram(values, w, counts, sums, n, bins)"
    serial = float(run(FLOAT_BINS, call, tmp_path).split()[1])
    for flags in COPIES_RUNS:  # reassociated: close to the serial sums
        got = float(run(out, call, tmp_path, *flags).split()[1])
        assert abs(got - serial) <= 1e-4 * abs(serial), flags
    # two arrays of bins: one array-section reduction of both, no copies
    two = apply_transform("private_bins", WEIGHTED,
                          {"extents": {"counts": "bins", "sums": "bins"}, "copies": 4})
    assert two is not None and "copies" not in two.split("*/", 1)[1]
    assert "reduction(+ : counts[0:bins], sums[0:bins])" in copies_pragma(two)


def test_rows_added_into_a_vector_take_no_copies():
    # `y[j]` is an affine position: each bin is met once per row, there is no chain of
    # equal bins to break, and four copies of y would only take four times the memory
    text = HEAD.replace("histogram", "vecmat") + ROWS_INTO_Y
    out = apply_transform("private_bins", text, {"extents": {"y": "n"}, "copies": 4})
    assert out is not None and "copies" not in out.split("*/", 1)[1]
    assert "omp parallel for schedule(static) reduction(+ : y[0:n])" in omp_pragmas(out)


def test_rows_into_a_vector_get_private_copies_then_four_rows_a_pass(tmp_path):
    """The copies make the row loop a plain loop again, one the jam takes: the chained
    move threads the rows and adds four of them per pass over each thread's copy, and is
    correct threaded and serial. A chain whose follow-up does not apply is not a move."""
    import re

    text = HEAD.replace("histogram", "vecmat") + ROWS_INTO_Y
    chain = {"extents": {"y": "n"}, "then": [["unroll_and_jam", {"factor": 4}]]}
    out = apply_transform("private_bins", text, chain)
    assert out is not None and "jammed by 4" in out
    assert "omp parallel for schedule(static) reduction(+ : y[0:n])" in omp_pragmas(out)
    assert re.search(r"y\[j\] = \(\(\(y\[j\] \+ \(row\[j\] \* xi\)\) \+ \(row_1\[j\] \* xi_1\)\)",
                     out), out
    check_vecmat(out, tmp_path, seed=11)
    # the histogram's scatter takes copies, but no jam: the chain does not apply
    assert apply_transform("private_bins", TEXTBOOK, {"extents": {"counts": "bins"}})
    assert apply_transform("private_bins", TEXTBOOK, {"extents": {"counts": "bins"},
                                                      "then": chain["then"]}) is None


def test_the_loop_specialist_offers_the_copies_with_and_without_the_jam():
    from kernelcrew.agents.heuristic.loop import Loop

    text = (HEAD.replace("histogram", "matvec_t")
            + ROWS_INTO_Y.replace("vecmat", "matvec_t"))
    props = [p for p in Loop().propose(_library_ctx("matvec_t", text))
             if p.change.kind == "private_bins"]
    assert [p.change.params.get("then") for p in props] in (
        [None, [["unroll_and_jam", {"factor": 4}]]], [[["unroll_and_jam", {"factor": 4}]], None])
    jammed = next(p for p in props if p.change.params.get("then"))
    assert "jammed by 4" in jammed.change.kernel and "jammed" not in next(
        p for p in props if not p.change.params.get("then")).change.kernel
