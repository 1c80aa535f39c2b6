"""On a CUDA device: kernels really run through CuPy, are judged, timed and profiled.

Skipped without one (CuPy missing or no device). `scripts/gpu_check.sh` runs these on
the lent H200 (issue #10) with KERNELCREW_GPU_OUT set, where the raw ncu exports are
kept. The per-op fast-vs-baseline checks are also marked `slow`: the script runs the
same checks through the CLI instead.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from kernelcrew.kernels.kernelfile import load_kernel
from kernelcrew.kernels.spec import load_op
from kernelcrew.tools.backends.cuda import CudaBackend, probe_device
from kernelcrew.tools.config import BenchSettings
from kernelcrew.tools.judge.check import check
from kernelcrew.tools.judge.harness import Harness
from kernelcrew.tools.observe.ncu import (
    ncu_command,
    ncu_import_command,
    ncu_path,
    ncu_to_summary_fields,
    parse_raw_csv,
    parse_source_csv,
)
from tests.cuda.helpers import FIXTURES, OPS, fast_cu

CAN_RUN, WHY = CudaBackend().can_run()
pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not CAN_RUN, reason=f"needs a CUDA device: "
                                                  f"{WHY}")]
QUICK = BenchSettings(reps=6, rounds=1, warmup=2)


def _out_dir(name: str) -> Path | None:
    root = os.environ.get("KERNELCREW_GPU_OUT")
    if not root:
        return None
    p = Path(root) / name
    p.mkdir(parents=True, exist_ok=True)
    return p


def test_device_is_seen_and_targeted() -> None:
    dev = probe_device()
    assert dev.ok and dev.sm_count > 0 and dev.l2_bytes > 0
    assert CudaBackend().target_arch() == dev.arch or os.environ.get("KERNELCREW_CUDA_ARCH")
    assert dev.name in CudaBackend().describe()


@pytest.mark.slow
@pytest.mark.parametrize("op", OPS)
def test_fast_kernel_is_correct_and_faster_than_the_baseline(op: str) -> None:
    """Also runs the op's baseline.cu: check() raises if the baseline itself is wrong."""
    res = check(op, fast_cu(op), "cuda", seed=7, bench=BenchSettings(reps=10, rounds=2))
    assert res.ran and res.correct, res.reason
    assert res.verdict == "faster", (res.verdict, res.speedup, res.reason)


def test_launches_in_order_with_temps_and_dynamic_shared_memory() -> None:
    res = check("scale_shift_sum", FIXTURES / "ok" / "two_pass_temps.cu", "cuda", seed=3,
                bench=QUICK)
    assert res.correct, res.reason


@pytest.mark.parametrize(("name", "words"), [
    ("writes_nothing.cu", "wrong result"),  # NaN poison: nothing stale can pass
    ("modifies_input.cu", "modified its input"),  # checksums of the device copy
    ("illegal_address.cu", "kernel "),  # the worker dies; the parent names the case
])
def test_adversarial_kernels_are_rejected(name: str, words: str) -> None:
    res = check("scale_shift_sum", FIXTURES / "gpu" / name, "cuda", seed=5, bench=QUICK)
    assert res.verdict == "rejected" and res.correct is False
    assert words in res.reason, res.reason


def test_size_zero_case_skips_the_launch(tmp_path: Path) -> None:
    op = tmp_path / "sss_zero"
    shutil.copytree(load_op("scale_shift_sum").folder, op)
    yml = (op / "op.yaml").read_text()
    start = yml.index("shapes:")
    end = yml.index("baselines:")
    yml = yml[:start] + ("shapes:\n  typical: {weight: 1.0, cases: [{rows: 0, cols: 7}, "
                         "{rows: 5, cols: 0}, {rows: 3, cols: 9}]}\n") + yml[end:]
    (op / "op.yaml").write_text(yml)
    res = check(op, FIXTURES / "ok" / "two_pass_temps.cu", "cuda", seed=1, bench=QUICK)
    assert res.correct, res.reason


@pytest.mark.skipif(ncu_path() is None, reason="ncu (Nsight Compute) not found")
def test_ncu_profiles_one_kernel_of_a_worker_run(tmp_path: Path) -> None:
    spec = load_op("softmax_rows")
    kf = load_kernel(spec.folder / "baseline.cu")
    be = CudaBackend()
    comp = be.compile(kf, spec)
    assert comp.ok, comp.reason
    typical = [c for c in spec.cases() if c.group == "typical"][:1]
    keep = _out_dir("ncu")

    def run(argv: list[str], name: str) -> str:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=240, check=False)
        if keep:
            (keep / f"{name}.csv").write_text(proc.stdout)
            (keep / f"{name}.stderr.txt").write_text(" ".join(argv) + "\n" + proc.stderr)
        assert proc.returncode == 0, proc.stderr[-2000:]
        return proc.stdout

    with Harness(spec, be, seed=1, bench=BenchSettings(reps=1, input_sets=1),
                 cases=typical) as h:
        jobs = {}
        for name in ("raw", "source"):
            d = tmp_path / name
            d.mkdir()
            (d / "job.json").write_text(json.dumps(h.job(comp, kf, "verify", 0, d)))
            jobs[name] = d / "job.json"
        raw = run(ncu_command(jobs["raw"], kernel="softmax_rows"), "softmax_rows_raw")
        report = tmp_path / "softmax_rows"
        run(ncu_command(jobs["source"], kernel="softmax_rows", sections=["SourceCounters"],
                        export=report), "softmax_rows_sourcecounters_raw")
        source = run(ncu_import_command(f"{report}.ncu-rep", page="source"),
                     "softmax_rows_source")
        if keep and Path(f"{report}.ncu-rep").exists():
            shutil.copy(f"{report}.ncu-rep", keep / "softmax_rows.ncu-rep")
    launches = parse_raw_csv(raw)
    assert launches and launches[0].name == "softmax_rows", raw[-2000:]
    summary = ncu_to_summary_fields(launches, parse_source_csv(source))
    missing = [k for k, m in summary.metrics.items() if m.value is None]
    assert not missing, {k: summary.metrics[k].reason for k in missing}
    assert summary.metrics["registers_per_thread"].value > 0
    assert summary.top_stalls and summary.hot_regions, source[-2000:]


def test_cupy_peer_is_correct_and_timed_on_the_device() -> None:
    from kernelcrew.evals.peers.cuda_peers import cupy_peer

    res = cupy_peer("gelu_tanh", reps=3)
    assert not res.error, res.error
    assert res.typical_ms and res.typical_ms > 0
    assert res.cases and all(c.correct for c in res.cases)


def test_device_peaks_have_the_copy_bandwidth_and_the_fp32_rate() -> None:
    from kernelcrew.tools.backends.peaks import cuda_peaks

    pk = cuda_peaks(CudaBackend(), remeasure=True)
    assert pk.copy_gbps > 100
    assert pk.sm_count and pk.sm_count == probe_device().sm_count
    if probe_device().arch in ("sm_80", "sm_90"):
        assert pk.fp32_gflops and pk.fp32_gflops > 1000, pk
