"""`kernelcrew profile` on the CPU: every library op gets the fixed 600-character summary
with its roofline and bottleneck, and the diagnosis is right where the answer is known."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from kernelcrew.errors import InputError
from kernelcrew.kernels.spec import library_ops
from kernelcrew.results import ProfileResult
from kernelcrew.tools.backends.cpu import cpu_threads
from kernelcrew.tools.observe import perf
from kernelcrew.tools.observe.cpu_profile import LAUNCH_BOUND_MS
from kernelcrew.tools.observe.profile import profile
from kernelcrew.tools.observe.summary import CPU_LABELS, SUMMARY_MAX

from .conftest import BENCH, REPO, fast_kernel

OPS = library_ops()
# profiled in the quick suite (about 4 s each): memory-bound, compute-bound, strided, a
# scatter and a threaded baseline; the rest in the slow one
PROFILED_QUICK = {"scale_shift_sum", "small_matmul", "transpose", "histogram", "conv2d"}


def fields(summary: str) -> list[str]:
    return summary.split(" | ")


def assert_template(summary: str) -> None:
    assert len(summary) <= SUMMARY_MAX
    parts = fields(summary)
    assert len(parts) == len(CPU_LABELS), summary
    for part, label in zip(parts, CPU_LABELS, strict=True):
        assert part.startswith(label), (label, summary)
        assert part[len(label):].strip(), f"field {label!r} is empty: {summary}"


@pytest.mark.parametrize("op", [pytest.param(op, marks=() if op in PROFILED_QUICK else
                                             pytest.mark.slow) for op in OPS])
def test_every_library_op_gets_the_summary_roofline_and_bottleneck(op: str, profiled) -> None:
    # a mid-sized case keeps the folder fast; the default (largest typical) case is
    # profiled by the diagnosis tests below
    res = profiled(op, case="unaligned[0]")
    assert_template(res.summary)
    doc = json.loads(res.model_dump_json())
    assert doc["bottleneck"]["kind"] in ("memory-bound", "compute-bound", "latency-bound",
                                         "launch-bound")
    assert doc["bottleneck"]["evidence"]
    roof = doc["roofline"]
    for key in ("achieved_gbps", "peak_gbps", "achieved_gflops", "peak_gflops",
                "bandwidth_share", "intensity", "bound_ms", "time_ms"):
        assert roof[key] is not None, key
    assert roof["time_ms"] > 0 and roof["bytes"] > 0
    # every metric is a number with its unit, or null with the reason
    for name, m in doc["metrics"].items():
        assert m["value"] is not None or m["reason"], name
    assert res.case.startswith("unaligned[0]")


def test_naive_transpose_is_a_poor_access_pattern_with_low_bandwidth(profiled) -> None:
    res = profiled("transpose")
    assert res.case.startswith("typical[0]")  # the largest typical case by cost bytes
    assert_template(res.summary)
    d = res.bottleneck
    assert d.access_pattern == "poor"
    assert "poor access pattern" in d.evidence and "stride rows" in d.evidence
    assert d.kind != "memory-bound"
    assert res.roofline.bandwidth_share < 0.5
    assert "y inner stride=rows" in res.summary


def test_naive_small_matmul_is_not_called_memory_bound(profiled) -> None:
    res = profiled("small_matmul")
    assert res.bottleneck.kind != "memory-bound", res.bottleneck.evidence
    assert res.roofline.intensity > 1  # its cost model is not a streaming op


# scale_shift_sum on one thread: its fast kernel's edge over the baseline is SIMD and the
# hoisted affine map, and two OpenMP threads on a 2-core machine that other jobs share
# would measure the scheduler. transpose's edge (cache blocking) is large enough to show
# with every thread.
@pytest.mark.parametrize("op, threads", [("scale_shift_sum", 1), ("transpose", None)])
def test_fast_kernel_achieves_more_bandwidth_than_its_baseline(op: str, threads: int | None,
                                                               profiled) -> None:
    # the default (largest typical) case: on a tiny one an OpenMP kernel's fork/join would
    # decide, not the kernel
    base, fast = profiled(op), profiled(op, fast_kernel(op), threads=threads)
    assert fast.case == base.case
    # at the best runs' time (p10): on a busy 2-core machine an OpenMP kernel's median
    # is at the mercy of the scheduler, its best runs are not
    got = {r.kernel: (r.metrics["achieved_bandwidth_p10"].value, r.roofline.achieved_gbps)
           for r in (base, fast)}
    assert got[fast.kernel][0] > got[base.kernel][0], f"{op}: (p10, median) GB/s {got}"
    assert fast.summary.startswith(f"threads {threads or cpu_threads()}/") and \
        "(OpenMP)" in fast.summary


def test_vectorization_report_names_the_hot_loops(profiled) -> None:
    base = profiled("scale_shift_sum")
    fast = profiled("scale_shift_sum", fast_kernel("scale_shift_sum"), threads=1)
    vec = {r.kernel: next(f for f in fields(r.summary) if f.startswith("vec:"))
           for r in (base, fast)}
    assert " no (" in vec[base.kernel]  # the -O2 baseline's inner loop is not vectorized
    assert " yes 64B" in vec[fast.kernel] or " yes 32B" in vec[fast.kernel]  # omp simd


@pytest.mark.tools  # perf: an optional system tool (make test-tools)
def test_hot_regions_come_from_perf_when_it_works(profiled) -> None:
    res = profiled("transpose")
    if not perf.perf_support().record:
        pytest.skip(f"perf record does not work here: {perf.perf_support().record_reason}")
    top = res.hot_regions[0]
    assert top.where.startswith("loop l.11") and top.share > 0.5
    assert res.metrics["threads_busy"].value == 1
    assert "occupancy 1/" in res.summary


def test_without_perf_the_hot_regions_are_a_labelled_static_estimate(monkeypatch) -> None:
    monkeypatch.setenv(perf.PERF_ENV, "off")
    perf.perf_support.cache_clear()
    try:
        res = profile("transpose", None, "cpu", case="unaligned[0]", bench=BENCH)
    finally:
        monkeypatch.delenv(perf.PERF_ENV)
        perf.perf_support.cache_clear()
    assert_template(res.summary)
    assert "hot: (static est.)" in res.summary and "occupancy n/a (perf off)" in res.summary
    assert res.hot_regions and res.hot_regions[0].share is None
    assert "static estimate" in res.hot_regions[0].what
    assert res.metrics["threads_busy"].value is None and res.metrics["threads_busy"].reason
    assert res.bottleneck.access_pattern == "poor"  # the diagnosis does not need perf


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kernelcrew.cli", *args], capture_output=True,
                          text=True, timeout=300, cwd=REPO, check=False)


def test_cli_json_on_a_tiny_case_is_launch_bound() -> None:
    proc = cli("profile", "scale_shift_sum", "--case", "boundary[1]", "--reps", "5", "--json")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    res = ProfileResult.model_validate(doc)
    assert_template(res.summary)
    assert res.case.startswith("boundary[1]")
    assert doc["bottleneck"]["kind"] == "launch-bound", doc["bottleneck"]
    # the kernel's own work is a thousandth of what the clock reads: the rest is the call.
    # The floor is the backend's, raised (up to 4x) where this session's round trip jitters
    floor = doc["metrics"]["timing_floor_ms"]["value"]
    assert LAUNCH_BOUND_MS <= floor <= 4 * LAUNCH_BOUND_MS
    assert doc["metrics"]["time_ms"]["value"] < floor
    assert doc["roofline"]["time_ms"] == pytest.approx(floor)  # rates taken at the floor
    assert doc["roofline"]["bound_ms"] < doc["roofline"]["time_ms"] / 10


def test_cli_text_mode_prints_the_summary_and_a_metrics_table(tmp_path) -> None:
    proc = cli("profile", "scale_shift_sum", str(fast_kernel("scale_shift_sum")), "--case",
               "boundary[0]", "--reps", "3")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("threads ") and len(lines[0]) <= SUMMARY_MAX
    assert any(ln.startswith("metric ") for ln in lines)
    assert any(ln.startswith("bottleneck: ") for ln in lines)


@pytest.mark.parametrize("args, words", [
    (["profile", "no_such_op"], "no such operator"),
    (["profile", "transpose", "--case", "typical[9]"], "no case 'typical[9]'"),
])
def test_cli_bad_input_exits_2_with_one_line(args: list[str], words: str) -> None:
    proc = cli(*args)
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    err = proc.stderr.strip().splitlines()
    assert len(err) == 1 and words in err[0], err


@pytest.mark.parametrize("kernel, backend, case, words", [
    ("missing_kernel.cpp", "cpu", None, "no such kernel file"),
    (str(fast_kernel("transpose")), "cuda", None, "pass --backend cpu"),
    (None, "cpu", "nope", "use GROUP[i]: typical[0..1]"),
    (None, "metal", None, "unknown backend"),
])
def test_bad_input_is_an_input_error_naming_the_fix(kernel, backend, case, words) -> None:
    with pytest.raises(InputError) as e:
        profile("transpose", kernel, backend, case=case, bench=BENCH)
    assert words in str(e.value)


def test_cli_a_kernel_that_fails_exits_1_with_one_line(tmp_path) -> None:
    bad = tmp_path / "wrong.cpp"
    bad.write_text(fast_kernel("transpose").read_text().replace("yj[i] = x[i * cols + j];",
                                                                  "yj[i] = 0.0f;"))
    proc = cli("profile", "transpose", str(bad), "--case", "boundary[1]", "--reps", "3")
    assert proc.returncode == 1, (proc.stdout, proc.stderr)
    err = proc.stderr.strip().splitlines()
    assert len(err) == 1 and "not correct" in err[0], err


@pytest.mark.slow  # the peak bandwidth measured per cache state: about 30 s for both
@pytest.mark.parametrize("state", ["cold", "warm"])
def test_profile_names_the_cache_state_and_uses_the_peak_measured_in_it(state: str) -> None:
    """`--cache` decides how the runs are timed; the profile says which state its numbers
    are for (JSON field, the summary's bandwidth field, the text output) and its
    bandwidth share is taken against the machine's peak in that same state, for the op's
    mix of reads and writes."""
    from kernelcrew.kernels.spec import load_op
    from kernelcrew.tools.backends.peaks import cpu_peaks

    args = ["profile", "scale_shift_sum", "--case", "unaligned[0]", "--reps", "3",
            "--cache", state]
    proc = cli(*args, "--json")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["cache"] == state
    assert f", {state})" in doc["summary"]  # "BW x of y GB/s (z%, cold)"
    spec = load_op("scale_shift_sum")
    case = next(c for c in spec.cases() if (c.group, c.index) == ("unaligned", 0))
    written = spec.written_share(case.sizes)
    assert doc["roofline"]["peak_gbps"] == pytest.approx(cpu_peaks().peak_gbps_for(state,
                                                                                 written))
    assert f"for {written:.0%} of the bytes written" in doc["metrics"]["peak_bandwidth"]["reason"]
    warm_peak = state == "warm" and cpu_peaks().triad_warm_gbps
    assert ("cache-resident" in doc["metrics"]["peak_bandwidth"]["reason"]) == bool(warm_peak)
    text = cli(*args)
    assert text.returncode == 0, text.stderr
    assert f"cache state: {state} (" in text.stdout
