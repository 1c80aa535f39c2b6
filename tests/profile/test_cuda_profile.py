"""CUDA profiles: compile-only here (ptxas resources, theoretical occupancy, `n/a (no
device)` for what needs a run), and the ncu export fixtures of tests/cuda turned into the
same summary template."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kernelcrew.tools.backends.cuda import nvcc_path
from kernelcrew.tools.observe.profile import pick_case, profile
from kernelcrew.tools.observe.summary import CUDA_LABELS, SUMMARY_MAX

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests" / "cuda" / "fixtures"


def cuda_ready() -> str:
    """Why the CUDA compile path cannot be tested here ("" when it can)."""
    return "" if nvcc_path() else "nvcc not installed"


needs_cuda = pytest.mark.skipif(bool(cuda_ready()), reason=cuda_ready() or "ready")


def assert_template(summary: str) -> None:
    assert len(summary) <= SUMMARY_MAX
    parts = summary.split(" | ")
    assert len(parts) == len(CUDA_LABELS), summary
    for part, label in zip(parts, CUDA_LABELS, strict=True):
        assert part.startswith(label), (label, summary)


@needs_cuda
def test_compile_only_profile_has_registers_and_theoretical_occupancy() -> None:
    from kernelcrew.tools.backends.cuda import CudaBackend

    if CudaBackend().can_run()[0]:
        pytest.skip("a device is here: the profile runs instead of compiling only")
    res = profile("transpose", None, "cuda")
    assert res.source == "compile-only" and res.roofline is None
    assert_template(res.summary)
    m = res.metrics
    assert m["registers_per_thread"].value and m["registers_per_thread"].value > 0
    assert m["spill_stores_bytes"].value == 0 and m["spill_loads_bytes"].value == 0
    assert 0 < m["theoretical_occupancy_pct"].value <= 100
    assert m["block_threads"].value == 256  # the baseline's BLOCK knob
    for name in ("time_ms", "achieved_occupancy_pct", "l2_hit_rate_pct",
                 "l1_ld_sectors_per_request"):
        assert m[name].value is None and m[name].reason == "no device"
    assert "BW n/a (no device)" in res.summary and "theoretical" in res.summary
    assert f"regs {int(m['registers_per_thread'].value)}/thread" in res.summary
    assert res.bottleneck.measured is False and "Not measured" in res.bottleneck.evidence
    json.loads(res.model_dump_json())


@needs_cuda
def test_compile_only_flags_a_grid_too_small_to_fill_the_gpu() -> None:
    from kernelcrew.tools.backends.cuda import CudaBackend

    if CudaBackend().can_run()[0]:
        pytest.skip("a device is here")
    res = profile("softmax_rows", None, "cuda")  # one thread per row: 16 blocks
    assert res.bottleneck.kind == "latency-bound"
    assert "too little parallelism" in res.bottleneck.evidence


@needs_cuda
def test_ncu_fixture_fills_the_summary_template() -> None:
    # exports captured on an H200: the raw page of the SourceCounters run, and its source page
    raw = FIXTURES / "ncu_captured_h200_softmax_sourcecounters_raw.csv"
    src = FIXTURES / "ncu_captured_h200_softmax_source.csv"
    from kernelcrew.kernels.kernelfile import load_kernel
    from kernelcrew.kernels.spec import load_op
    from kernelcrew.tools.backends.cuda import CudaBackend
    from kernelcrew.tools.observe import ncu
    from kernelcrew.tools.observe.cuda_profile import device_result, launches_of

    spec = load_op("softmax_rows")
    kf = load_kernel(spec.baseline_path("cuda"))
    case = pick_case(spec)
    comp = CudaBackend().compile(kf, spec)
    assert comp.ok, comp.reason
    launches = launches_of(kf, case, comp, "sm_90")
    main = max(launches, key=lambda x: x.threads)
    summ = ncu.ncu_to_summary_fields(ncu.parse_raw_csv(raw.read_text()),
                                     ncu.parse_source_csv(src.read_text()), kernel="softmax_rows")
    res = device_result(spec, kf, case, launches=launches, main=main, arch="sm_90",
                        time_ms=None, ncu_summary=summ, device="ncu fixture")
    assert_template(res.summary)
    assert res.source == "ncu" and "n/a" not in res.summary
    assert "sectors/req ld" in res.summary and "L2 hit" in res.summary
    assert res.roofline is not None and res.roofline.peak_gbps > 0
    assert res.bottleneck.access_pattern == "poor"  # ~32 sectors per request
    assert res.hot_regions and res.hot_regions[0].share > 0
