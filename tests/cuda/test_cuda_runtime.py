"""The CUDA runtime's host logic without a device: launch-plan arithmetic and checks,
and a full worker pass (the real worker loop, job and shared buffers of the harness,
outputs judged by it) over a NumPy stand-in for CuPy."""

from __future__ import annotations

import json
import os
import threading

import numpy as np
import pytest

from kernelcrew.errors import ExprError
from kernelcrew.kernels.kernelfile import load_kernel
from kernelcrew.kernels.spec import load_op
from kernelcrew.results import CaseRow, CompileResult
from kernelcrew.tools.backends.cuda import CudaBackend
from kernelcrew.tools.backends.cuda_runtime import LaunchError, plan_launches, temp_shapes
from kernelcrew.tools.config import BenchSettings
from kernelcrew.tools.judge.harness import Harness, fail_row, poison_all
from tests.cuda.helpers import FIXTURES


def _launch(grid, block, shared=0, kernel="k", args=("x",)):
    return {"kernel": kernel, "grid": grid, "block": block, "shared_bytes": shared,
            "args": list(args)}


def test_plan_evaluates_expressions_and_pads_to_three_dims() -> None:
    (d,) = plan_launches([_launch(["ceil_div(n, BLOCK)"], ["BLOCK"], "BLOCK*4")],
                         {"BLOCK": 256, "SCALE": 0.5}, {"n": 1000})
    assert (d.grid, d.block, d.shared_bytes, d.skipped) == ((4, 1, 1), (256, 1, 1), 1024, False)
    (d,) = plan_launches([_launch([2, "n"], [16, 16])], {}, {"n": 3})
    assert (d.grid, d.block, d.threads_per_block) == ((2, 3, 1), (16, 16, 1), 256)


def test_zero_grid_is_skipped_not_launched() -> None:
    (d,) = plan_launches([_launch(["ceil_div(n, 256)"], [256])], {}, {"n": 0})
    assert d.skipped


@pytest.mark.parametrize(("launch", "words"), [
    (_launch([1], [2048]), "2048 threads; at most 1024"),
    (_launch([1], [32, 32, 2]), "threads; at most 1024"),
    (_launch([1], [1, 1, 128]), "per-dimension limits"),
    (_launch([1], ["n - 5"]), "every dimension must be >= 1"),
    (_launch(["n - 5"], [32]), "negative"),
    (_launch([1, 70000], [32]), "exceeds the limits"),
    (_launch([1], [32], shared="300000"), "exceeds the device's"),
    (_launch([1], [32], shared="0 - n"), "negative"),
])
def test_bad_launch_dims_are_refused_with_the_launch_named(launch, words) -> None:
    with pytest.raises(LaunchError, match="launch\\[0\\] \\(k\\)") as e:
        plan_launches([launch], {}, {"n": 3}, max_shared_bytes=232448)
    assert words in str(e.value)


def test_float_knobs_do_not_reach_expressions() -> None:
    with pytest.raises(ExprError, match="unknown name 'SCALE'"):
        plan_launches([_launch(["SCALE"], [32])], {"SCALE": 0.5}, {"n": 3})


def test_temp_shapes() -> None:
    shapes = temp_shapes({"p": {"dtype": "float32", "shape": ["ceil_div(n, B)", 2]}},
                         {"B": 4}, {"n": 9})
    assert shapes == {"p": ((3, 2), "float32")}


# -- a whole worker pass on the NumPy stand-in --------------------------------------------
def _row_sums(grid, block, shared, x, rowsum, rows, cols):
    assert isinstance(rows, np.int64) and isinstance(cols, np.int64)
    assert shared == block[0] * 4 and grid == (int(rows), 1, 1)
    rowsum[:] = x.reshape(int(rows), int(cols)).sum(axis=1)


def _affine(grid, block, shared, rowsum, out, a, b, rows, cols):
    assert isinstance(a, np.float32) and isinstance(b, np.float32)
    out[:] = a * rowsum + b * np.float32(cols)


class _Driver:
    """The parent's side of the worker protocol, in this process (the worker runs in a
    thread, so the NumPy stand-in for CuPy is the one it imports): the real worker loop,
    the real job and shared buffers of the harness, commands sent as a session sends them
    (without stopping anything: there is no second process here)."""

    def __init__(self, h: Harness, comp: CompileResult, kf, out_dir) -> None:
        from kernelcrew.tools.judge import worker

        self.outputs, self.slots = h.fresh_outputs()
        job = h.job(comp, kf, self.outputs, self.slots)
        job["fifo_cmd"], job["fifo_reply"] = str(out_dir / "cmd"), str(out_dir / "reply")
        job["freeze"] = False
        os.mkfifo(job["fifo_cmd"])
        os.mkfifo(job["fifo_reply"])
        (out_dir / "job.json").write_text(json.dumps(job))
        self.tx = os.open(job["fifo_cmd"], os.O_RDWR)
        self.rx = os.fdopen(os.open(job["fifo_reply"], os.O_RDWR))
        self.error: list[BaseException] = []

        def serve() -> None:
            try:
                worker.main(str(out_dir / "job.json"))
            except BaseException as e:  # noqa: BLE001 - handed to the test
                self.error.append(e)
                os.write(os.open(job["fifo_reply"], os.O_WRONLY), b"died\n")

        self.thread = threading.Thread(target=serve, daemon=True)
        self.thread.start()
        self.expect("hello")

    def expect(self, word: str, *cmd: object) -> list[str]:
        if cmd:
            os.write(self.tx, (" ".join(map(str, cmd)) + "\n").encode())
        got = self.rx.readline().split()
        if self.error:
            raise self.error[0]
        assert got and got[0] == word, got
        return got

    def views(self, ci: int, k: int) -> dict[str, np.ndarray]:
        return {n: self.outputs.array(s) for n, s in self.slots[ci][k].items()}


def _run_worker(fake_cupy, tmp_path, kernel_path, *, mode="bench", reps=4):
    """Every case through the worker: the first call on each input set, then (bench) the
    warm-up and `reps` timed calls on changed inputs, each judged in full by the harness.
    Returns the harness, a row per case and per case the replies' (ms, runs per timing)."""
    spec = load_op("scale_shift_sum")
    kf = load_kernel(kernel_path)
    comp = CompileResult(ok=True, artifact=str(tmp_path / "kernel.cubin"))
    small = [c for c in spec.cases() if c.sizes["rows"] * c.sizes["cols"] <= 2**20]
    h = Harness(spec, CudaBackend(), seed=1, bench=BenchSettings(reps=reps, warmup=1),
                cases=small)
    out_dir = tmp_path / "run"
    out_dir.mkdir()
    drv = _Driver(h, comp, kf, out_dir)
    drv.expect("loaded", "load")
    rows, done = [], {}
    for ci, c in enumerate(h.cases):
        drv.expect("ready", "case", ci)
        d = h.data(c)
        row, timings = None, []
        for k in range(len(d.slots)):
            poison_all(drv.views(ci, k))
            got = drv.expect("done", "call", k, 0, 1)
            if len(got) > 3:
                row = fail_row(c, f"the kernel modified its input(s) {got[3]}")
                break
            row, _, _ = h.judge_outputs(c, {n: a.copy() for n, a in drv.views(ci, k).items()},
                                        d.references[k], f"first call, input set {k}")
            if row is not None:
                break
        if row is None and mode == "bench":
            drv.expect("done", "warm", 0, h.bench.warmup)
            for r in range(reps):
                k = r % len(d.slots)
                ch = h.fresh_changes(c, k, [7, r])
                views = d.inputs(k)
                ch.apply(views)
                poison_all(drv.views(ci, k))
                cold = h.cache_state(c) == "cold"
                got = drv.expect("done", "call", k, int(cold), 0)
                timings.append((float(got[1]), int(got[2])))
                row, _, _ = h.judge_outputs(c, {n: a.copy() for n, a in drv.views(ci, k).items()},
                                            h.reference(c, views), f"timed run {r}")
                ch.undo(views)
                if row is not None:
                    break
        rows.append(row or CaseRow(group=c.group, case=c.label, sizes=c.sizes, status="pass"))
        done[c.label] = timings
    drv.expect("bye", "end")
    drv.thread.join(10)
    drv.outputs.close()
    return h, rows, done


def test_worker_runs_a_launch_plan_with_temps_and_the_harness_judges_it(fake_cupy,
                                                                        tmp_path) -> None:
    fake_cupy.KERNELS.update(row_sums=_row_sums, affine=_affine)
    h, rows, done = _run_worker(fake_cupy, tmp_path, FIXTURES / "ok" / "two_pass_temps.cu")
    try:
        assert [r.status for r in rows] == ["pass"] * len(rows), [r.detail for r in rows]
        ev = next(iter(done.values()))
        assert [ms for ms, _ in ev] == [0.125] * 4  # the events' elapsed time
        names = [name for name, *_ in fake_cupy.LAUNCHES]
        assert names[:2] == ["row_sums", "affine"]  # in the file's order
    finally:
        h.close()


@pytest.mark.parametrize("cache", ["cold", "warm"])
def test_cold_runs_flush_l2_with_a_read_only_sweep(fake_cupy, tmp_path, monkeypatch,
                                                    cache) -> None:
    """Cold: before every timed launch, the flush buffer (twice the L2) is copied to the
    host (read through L2, nothing written on the device) and never memset during the
    timed runs; warm: no sweep at all. Verify calls are never flushed."""
    monkeypatch.setenv("KERNELCREW_CACHE", cache)
    fake_cupy.KERNELS["scale_shift_sum"] = lambda grid, block, shared, x, out, a, b, r, c: \
        out.__setitem__(slice(None), (a * x.astype(np.float64) + b).sum(axis=1))
    h, _rows, _done = _run_worker(fake_cupy, tmp_path, FIXTURES / "gpu" / "writes_nothing.cu",
                                reps=4)
    try:
        l2 = fake_cupy.PROPS["l2CacheSize"]
        sweeps = [t for t in fake_cupy.TRANSFERS if t[0] == "memcpy_d2h"]
        flush_ptr = next(t[1] for t in fake_cupy.TRANSFERS if t[0] == "memset" and t[2] >= 2 * l2)
        # per case: one timing per input set to agree on runs per timing, the first call
        # of each (2 sets), the warm-up call, then the timed calls
        timed_launches = len(fake_cupy.LAUNCHES) - len(h.cases) * (2 + 2 + 1)
        if cache == "cold":
            assert sweeps and all(t[1] == flush_ptr and t[2] >= 2 * l2 for t in sweeps)
            assert len(sweeps) == 4 * len(h.cases) == timed_launches
        else:
            assert sweeps == []
        # the flush buffer is written once, at start-up, never between timed runs
        assert [t for t in fake_cupy.TRANSFERS if t[1] == flush_ptr and t[0] == "memset"] \
            == [fake_cupy.TRANSFERS[0]]
    finally:
        h.close()


def test_worker_outputs_are_poisoned_so_writing_nothing_fails(fake_cupy, tmp_path) -> None:
    fake_cupy.KERNELS["scale_shift_sum"] = lambda grid, block, shared, *args: None
    h, rows, _ = _run_worker(fake_cupy, tmp_path, FIXTURES / "gpu" / "writes_nothing.cu",
                             mode="verify", reps=0)
    try:
        assert all(r.status == "fail" for r in rows)
        assert "NaN" in rows[0].detail or "nan" in rows[0].detail.lower()
    finally:
        h.close()


def test_a_kernel_that_changes_its_inputs_on_the_device_is_caught(fake_cupy, tmp_path) -> None:
    """The worker uploads the parent's inputs before every call; on a call whose outputs
    are checked it also compares the device's copy with them afterwards."""
    def zeroes_input(grid, block, shared, x, out, a, b, rows, cols):
        out[:] = (a * x.reshape(int(rows), int(cols)) + b).sum(axis=1)
        x[:] = 0

    fake_cupy.KERNELS["scale_shift_sum"] = zeroes_input
    h, rows, _ = _run_worker(fake_cupy, tmp_path, FIXTURES / "gpu" / "modifies_input.cu",
                             mode="verify", reps=0)
    try:
        assert "modified its input" in rows[0].detail
    finally:
        h.close()


def test_a_kernel_error_propagates_out_of_the_worker(fake_cupy, tmp_path) -> None:
    def illegal(grid, block, shared, *args):
        raise RuntimeError("cudaErrorIllegalAddress: an illegal memory access was encountered")

    fake_cupy.KERNELS["scale_shift_sum"] = illegal
    with pytest.raises(RuntimeError, match="IllegalAddress"):
        _run_worker(fake_cupy, tmp_path, FIXTURES / "gpu" / "illegal_address.cu",
                    mode="verify", reps=0)


def test_missing_kernel_symbol_fails_while_loading(fake_cupy, tmp_path) -> None:
    with pytest.raises(RuntimeError, match="named symbol not found"):
        _run_worker(fake_cupy, tmp_path, FIXTURES / "gpu" / "writes_nothing.cu", mode="verify",
                    reps=0)


def test_short_plans_are_timed_as_repeated_runs_between_one_event_pair(fake_cupy,
                                                                        tmp_path) -> None:
    """A plan under MIN_TIMED_MS (the fake device: 2 us per launch, two launches) is timed
    as many back-to-back runs between one pair of events; the time per run comes back and
    the count is recorded in the worker's result and the harness's rows."""
    from kernelcrew.tools.backends.cuda_runtime import MIN_TIMED_MS, repeats_for

    fake_cupy.LAUNCH_MS = 0.002
    fake_cupy.KERNELS.update(row_sums=_row_sums, affine=_affine)
    h, _rows, done = _run_worker(fake_cupy, tmp_path, FIXTURES / "ok" / "two_pass_temps.cu")
    try:
        ev = next(iter(done.values()))
        want = repeats_for(0.004)
        assert want == 13 and want * 0.004 >= MIN_TIMED_MS
        assert {n for _, n in ev} == {want}
        assert [ms for ms, _ in ev] == pytest.approx([0.004] * 4)  # per run, not per timing
        # per case: one single run per input set to agree on the count, then the first
        # call of each set, the warm-up call and 4 timed calls, each `want` runs of the
        # 2-launch plan
        nsets = h.bench.input_sets
        assert len(fake_cupy.LAUNCHES) == len(h.cases) * (2 * nsets + 2 * want * (nsets + 1 + 4))
        assert all(r.status == "pass" for r in _rows)
    finally:
        h.close()


def test_every_input_set_of_a_case_is_timed_with_the_same_count_of_runs(fake_cupy,
                                                                          tmp_path) -> None:
    """The parent scales every reported time of a case by the case's runs_per_timing, so
    every input set must be timed with that count. On an H200 a first timing slowed by an
    idle GPU (about +20 us) left one input set at 2 runs per timing and the other at 13:
    the parent then saw more reported time than its clock measured, and rejected honest
    kernels. Here the first event pair read (input set 0's verify call) is 0.03 ms slower."""
    from kernelcrew.tools.backends.cuda_runtime import repeats_for

    fake_cupy.LAUNCH_MS = 0.002
    fake_cupy.EXTRA_MS[:] = [0.03]
    fake_cupy.KERNELS.update(row_sums=_row_sums, affine=_affine)
    assert repeats_for(0.004 + 0.03) == 2 and repeats_for(0.004) == 13
    h, _rows, done = _run_worker(fake_cupy, tmp_path, FIXTURES / "ok" / "two_pass_temps.cu")
    try:
        first = next(iter(done.values()))
        assert h.bench.input_sets >= 2  # the case has two input sets to differ
        assert {n for _, n in first} == {13}
        nsets = h.bench.input_sets
        assert len(fake_cupy.LAUNCHES) == len(h.cases) * (2 * nsets + 2 * 13 * (nsets + 1 + 4))
        assert [ms for ms, _ in first] == pytest.approx([0.004] * 4)
    finally:
        h.close()


def test_repeats_for() -> None:
    from kernelcrew.tools.backends.cuda_runtime import MAX_REPEATS, MIN_TIMED_MS, repeats_for

    assert repeats_for(MIN_TIMED_MS) == 1 and repeats_for(1.0) == 1
    assert repeats_for(MIN_TIMED_MS / 2) == 2
    assert repeats_for(0.0) == MAX_REPEATS and repeats_for(1e-9) == MAX_REPEATS
