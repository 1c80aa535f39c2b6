"""Peak memory bandwidth and FLOP/s of this machine, measured once and cached.

- bandwidth: a STREAM-style triad `a[i] = b[i] + s * c[i]` (double, 24 bytes counted per
  element, as STREAM does: no write-allocate traffic) on three arrays each at least twice
  the last-level cache, best of a few passes; and a read-only sweep (the max over the
  same three arrays, 24 bytes per element). A kernel's ceiling depends on its mix of reads
  and writes (`bandwidth_ceiling`): where each line of `a` is read before it is written,
  the triad moves 32 bytes for every 24 counted, a kernel that only reads moves what it
  counts, and a GEMV can pass the triad's figure by up to a third;
- FLOP/s: independent vector FMA chains (enough accumulators to hide the FMA latency),
  fp32, the widest vectors the compiler targets with -march=native;
- both compiled with the kernels' g++ (-O3 -march=native -fopenmp), run as a sandboxed
  process with the kernels' thread count (and once more with one thread);
- NumPy copy bandwidth (np.copyto, read + write bytes counted) for comparison.

The result is cached as JSON under the cache directory, keyed by the machine
fingerprint, the thread count and the compiler version: a second call reads it back.
"""

from __future__ import annotations

import json
import os
import shutil
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
from filelock import FileLock
from pydantic import BaseModel

from kernelcrew.tools.backends.compile import (
    cache_key,
    compile_cached,
    machine_fingerprint,
    tool_version,
)
from kernelcrew.tools.backends.cpuinfo import CXX, cpu_threads, llc_bytes
from kernelcrew.tools.config import cache_dir, scratch_root
from kernelcrew.tools.locks import bench_lock
from kernelcrew.tools.sandbox import run_confined

PEAKS_TIMEOUT_S = 120.0  # the whole measurement; normally a few seconds
MIN_ARRAY_MIB = 512  # per triad array, and at least 2x the last-level cache
NUMPY_ARRAY_MIB = 256  # per NumPy copy array (2 arrays)
FMA_WINDOW_S = 0.004  # seconds per FMA timing window (best of 20)
MEASUREMENTS = 0  # how many times this process measured (tests pin the cache with it)

_BENCH_CPP = r"""
#include <omp.h>
#include <cstdio>
#include <cstdlib>
#include <cstdint>

#if defined(__AVX512F__)
typedef float vf __attribute__((vector_size(64)));
#elif defined(__AVX__)
typedef float vf __attribute__((vector_size(32)));
#else
typedef float vf __attribute__((vector_size(16)));
#endif
static const int LANES = sizeof(vf) / sizeof(float);
static const int NACC = 16;  // independent chains: > FMA latency x FMA ports

static double triad(double* a, const double* b, const double* c, int64_t n, int threads,
                    int passes) {
    double best = 1e30;
    for (int p = 0; p < passes; ++p) {
        const double s = 3.0 + p;
        double t0 = omp_get_wtime();
#pragma omp parallel for schedule(static) num_threads(threads)
        for (int64_t i = 0; i < n; ++i) a[i] = b[i] + s * c[i];
        double t = omp_get_wtime() - t0;
        if (t < best) best = t;
    }
    return best;
}

static double fma_loop(int64_t iters, int threads, float* sink) {
    double t0 = omp_get_wtime();
    float total = 0.0f;
#pragma omp parallel num_threads(threads) reduction(+ : total)
    {
        vf acc[NACC];
        vf m, add;
        for (int l = 0; l < LANES; ++l) { m[l] = 0.9999999f; add[l] = 1e-7f; }
        for (int k = 0; k < NACC; ++k)
            for (int l = 0; l < LANES; ++l) acc[k][l] = 0.001f * (k + l) + omp_get_thread_num();
        for (int64_t it = 0; it < iters; ++it) {
#pragma GCC unroll 16
            for (int k = 0; k < NACC; ++k) acc[k] = acc[k] * m + add;
        }
        for (int k = 0; k < NACC; ++k)
            for (int l = 0; l < LANES; ++l) total += acc[k][l];
    }
    *sink += total;
    return omp_get_wtime() - t0;
}

// Iterations for a window of about window_s on one thread (the work per thread is the
// same with more threads; calibrating with a team would time its fork/join instead).
static int64_t fma_iters(double window_s, float* sink) {
    int64_t iters = 1 << 10;
    double t = fma_loop(iters, 1, sink);
    while (t < window_s / 4) { iters *= 2; t = fma_loop(iters, 1, sink); }
    return (int64_t)(iters * (window_s / t)) + 1;
}

// Many short windows, best one: on a busy machine a long window is always interrupted,
// a short one now and then is not.
static double fma_gflops(int threads, int64_t iters, int reps, float* sink) {
    double best = 1e30;
    for (int r = 0; r < reps; ++r) {
        double tr = fma_loop(iters, threads, sink);
        if (tr < best) best = tr;
    }
    return 2.0 * LANES * NACC * (double)iters * threads / best / 1e9;
}

// A read-only sweep: the max over the three arrays (exact, so nothing is lost to
// rounding), three streams at once as the triad has (one stream alone leaves a core's
// prefetchers short of misses in flight and reads slower than the triad moves)
static double sweep(const double* a, const double* b, const double* c, int64_t n,
                    int threads, int passes, double* sink) {
    double best = 1e30;
    for (int p = 0; p < passes; ++p) {
        double m = -1e300;
        double t0 = omp_get_wtime();
#pragma omp parallel for simd schedule(static) num_threads(threads) reduction(max : m)
        for (int64_t i = 0; i < n; ++i) {
            double v = a[i] > b[i] ? a[i] : b[i];
            v = v > c[i] ? v : c[i];
            m = v > m ? v : m;
        }
        double t = omp_get_wtime() - t0;
        *sink += m;
        if (t < best) best = t;
    }
    return best;
}

int main(int argc, char** argv) {
    if (argc < 4) return 2;
    const int64_t n = atoll(argv[1]);
    const int threads = atoi(argv[2]);
    const double fma_s = atof(argv[3]);
    double* a = (double*)aligned_alloc(64, n * sizeof(double));
    double* b = (double*)aligned_alloc(64, n * sizeof(double));
    double* c = (double*)aligned_alloc(64, n * sizeof(double));
    if (!a || !b || !c) { printf("{\"error\": \"allocation failed\"}\n"); return 3; }
#pragma omp parallel for schedule(static) num_threads(threads)
    for (int64_t i = 0; i < n; ++i) { a[i] = 0.0; b[i] = 1.0; c[i] = 2.0; }  // first touch
    double t_all = triad(a, b, c, n, threads, 4);
    double t_one = triad(a, b, c, n, 1, 2);
    // the same triad on arrays that stay in the last-level cache (warm): the peak for
    // kernels timed warm on cache-resident data
    const int64_t nw = argc > 4 ? atoll(argv[4]) : 0;
    double t_warm = nw > 0 ? triad(a, b, c, nw, threads, 50) : 0.0;
    double dsink = 0.0;
    double r_all = sweep(a, b, c, n, threads, 4, &dsink);
    double r_one = sweep(a, b, c, n, 1, 2, &dsink);
    double r_warm = nw > 0 ? sweep(a, b, c, nw, threads, 50, &dsink) : 0.0;
    float sink = (float)a[n / 2] + (float)dsink;
    const int64_t iters = fma_iters(fma_s, &sink);
    double f_one = fma_gflops(1, iters, 20, &sink);
    double f_all = fma_gflops(threads, 4 * iters, 12, &sink);  // longer: amortize fork/join
    const double bytes = 24.0 * (double)n;
    printf("{\"triad_gbps\": %.4f, \"triad_1t_gbps\": %.4f, \"fma_gflops\": %.4f, "
           "\"fma_1t_gflops\": %.4f, \"vector_bytes\": %d, \"triad_warm_gbps\": %.4f, "
           "\"read_gbps\": %.4f, \"read_1t_gbps\": %.4f, \"read_warm_gbps\": %.4f, "
           "\"sink\": %g}\n",
           bytes / t_all / 1e9, bytes / t_one / 1e9, f_all, f_one, (int)sizeof(vf),
           t_warm > 0 ? 24.0 * (double)nw / t_warm / 1e9 : 0.0,
           bytes / r_all / 1e9, bytes / r_one / 1e9,
           r_warm > 0 ? 24.0 * (double)nw / r_warm / 1e9 : 0.0, (double)sink);
    free(a); free(b); free(c);
    return 0;
}
"""


class CpuPeaks(BaseModel):
    """What this machine can do at best, for the roofline."""

    triad_gbps: float  # STREAM triad, all kernel threads (GB/s, 1e9 bytes)
    triad_1t_gbps: float  # the same with one thread
    # the triad on arrays that fit in the last-level cache (3 arrays, half the LLC), timed
    # warm: the bandwidth peak for kernels timed warm on cache-resident data (cold ones
    # compare with triad_gbps, whose arrays are at least twice the LLC)
    triad_warm_gbps: float | None = None
    # the read-only sweep (the max of the triad's three arrays, 24 bytes per element):
    # all kernel threads, one thread, and on cache-resident data (half the LLC, warm)
    read_gbps: float | None = None
    read_1t_gbps: float | None = None
    read_warm_gbps: float | None = None
    fma_gflops: float  # fp32 FMA, all kernel threads
    fma_1t_gflops: float
    numpy_copy_gbps: float  # np.copyto, single thread, read + write bytes
    threads: int
    vector_bytes: int  # width of the FMA vectors
    array_mib: int  # per triad array
    llc_mib: float | None  # last-level cache the sizes were chosen from
    compiler: str
    fingerprint: str
    measured_at: str  # ISO time of the measurement (a cache hit keeps it)
    seconds: float  # how long the measurement took
    method: str = ("STREAM triad (double, 24 B/element counted, best of 4 passes), a "
                   "read-only sweep (max of 3 arrays, 24 B/element) and fp32 vector FMA "
                   "chains (best of many short windows), g++ -O3 -march=native -fopenmp, "
                   "sandboxed; NumPy copy for comparison")

    @property
    def peak_gbps(self) -> float:
        """The best triad bandwidth, with all kernel threads or with one."""
        return max(self.triad_gbps, self.triad_1t_gbps)

    def peak_gbps_for(self, cache: str, written_share: float | None = None, *,
                      single: bool = False) -> float:
        """The bandwidth peak in the cache state a kernel was timed in (the DRAM sweeps
        for `cold`, the cache-resident ones for `warm`; the DRAM ones where unknown), for
        a kernel that writes `written_share` of the bytes it moves (None: the triad's
        figure as it is); `single`: one thread's."""
        if single:
            triad, read = self.triad_1t_gbps, self.read_1t_gbps
        else:
            triad, read = self.peak_gbps, max(self.read_gbps or 0, self.read_1t_gbps or 0)
        if cache == "warm" and not single:
            triad = max(self.triad_warm_gbps or 0, triad)
            read = max(self.read_warm_gbps or 0, read)
        if written_share is None:
            return triad
        return bandwidth_ceiling(triad, read or None, written_share)

    @property
    def peak_gflops(self) -> float:
        return max(self.fma_gflops, self.fma_1t_gflops)

    @property
    def numpy_factor(self) -> float:
        """How far apart the triad peak and NumPy's copy bandwidth are (>= 1)."""
        hi, lo = max(self.peak_gbps, self.numpy_copy_gbps), min(self.peak_gbps,
                                                                self.numpy_copy_gbps)
        return hi / lo if lo > 0 else float("inf")


TRIAD_WRITTEN = 1 / 3  # the triad's mix: a, written; b and c, read


def bandwidth_ceiling(triad_gbps: float, read_gbps: float | None,
                      written_share: float) -> float:
    """The most counted bytes per second a kernel can move when `written_share` of the
    bytes its cost model counts are written (the rest read), from the two measured mixes:
    the read-only sweep (none written) and the triad (a third written), interpolated in
    time per byte between them. Where a written line is first read for ownership (most
    CPUs), a byte written costs two transfers, a byte read one, so the time per counted
    byte grows linearly with the written share; where the CPU skips that read both
    sweeps read alike and the ceiling is flat. A mix that writes more than the triad (a
    copy) gets the triad's figure, which it cannot pass in either case. The read sweep
    never counts below the triad: a ceiling must not be too low."""
    read = max(read_gbps or triad_gbps, triad_gbps)
    share = min(max(written_share, 0.0), TRIAD_WRITTEN) / TRIAD_WRITTEN
    if share >= 1.0 or read == triad_gbps:  # the anchors as measured, not recomputed
        return triad_gbps
    if share <= 0.0:
        return read
    return 1.0 / (1.0 / read + share * (1.0 / triad_gbps - 1.0 / read))


def available_bytes() -> int | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def triad_array_bytes() -> int:
    """Per array: >= 512 MiB and >= 2x the LLC, capped at a sixth of the free memory."""
    want = max(MIN_ARRAY_MIB * 2**20, 2 * (llc_bytes() or 0))
    avail = available_bytes()
    if avail:
        want = min(want, avail // 6)
    return max(want, 16 * 2**20)


def peaks_path() -> Path:
    key = cache_key("cpu-peaks-v3", machine_fingerprint(), cpu_threads(), tool_version(CXX))
    return cache_dir() / "peaks" / f"cpu-{key}.json"


def cpu_peaks(*, remeasure: bool = False) -> CpuPeaks:
    """The cached peaks of this machine; measured on the first call (a few seconds)."""
    path = peaks_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(path) + ".lock"):
        if path.exists() and not remeasure:
            try:
                return CpuPeaks.model_validate_json(path.read_text())
            except ValueError:
                pass  # an old or broken cache entry: measure again
        peaks = measure_cpu_peaks()
        path.write_text(peaks.model_dump_json(indent=2))
        return peaks


def measure_cpu_peaks() -> CpuPeaks:
    global MEASUREMENTS

    MEASUREMENTS += 1
    t0 = time.monotonic()
    comp = compile_cached(
        source_text=_BENCH_CPP, source_name="peaks.cpp", artifact_name="peaks",
        argv_for=lambda src, out: [CXX, "-std=gnu++17", "-O3", "-march=native", "-fopenmp",
                                   "-ffp-contract=fast", src.name, "-o", out.name],
        key_parts=("cpu-peaks", tool_version(CXX), machine_fingerprint()))
    if not comp.ok:
        raise RuntimeError(f"the peak benchmark does not compile: {comp.reason}\n{comp.log}")
    threads = cpu_threads()
    n = triad_array_bytes() // 8
    work = scratch_root() / f"peaks-{uuid.uuid4().hex[:8]}"
    try:
        with bench_lock():
            run = run_confined(
                [comp.artifact, str(n), str(threads), str(FMA_WINDOW_S),
                 str((llc_bytes() or 0) // 6 // 8)], scratch=work,
                timeout_s=PEAKS_TIMEOUT_S, address_space_gib=3 * n * 8 / 2**30 + 4,
                env={"OMP_NUM_THREADS": str(threads), "OMP_PROC_BIND": "false"},
                log_name="peaks")
            numpy_gbps = numpy_copy_gbps()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if run.returncode != 0:
        raise RuntimeError(f"the peak benchmark failed: {run.describe()}")
    try:
        out = json.loads(run.stdout.strip().splitlines()[-1])
    except (IndexError, ValueError):
        raise RuntimeError(f"the peak benchmark printed no result: {run.stdout[-300:]}") from None
    if "error" in out:
        raise RuntimeError(f"the peak benchmark failed: {out['error']}")
    llc = llc_bytes()
    return CpuPeaks(
        triad_gbps=out["triad_gbps"], triad_1t_gbps=out["triad_1t_gbps"],
        triad_warm_gbps=out.get("triad_warm_gbps") or None,
        read_gbps=out.get("read_gbps") or None, read_1t_gbps=out.get("read_1t_gbps") or None,
        read_warm_gbps=out.get("read_warm_gbps") or None,
        fma_gflops=out["fma_gflops"], fma_1t_gflops=out["fma_1t_gflops"],
        numpy_copy_gbps=numpy_gbps, threads=threads, vector_bytes=out["vector_bytes"],
        array_mib=n * 8 // 2**20, llc_mib=llc / 2**20 if llc else None,
        compiler=tool_version(CXX), fingerprint=machine_fingerprint(),
        measured_at=datetime.now(UTC).isoformat(timespec="milliseconds"),
        seconds=round(time.monotonic() - t0, 3))


def numpy_copy_gbps(mib: int = NUMPY_ARRAY_MIB, reps: int = 3) -> float:
    """np.copyto between two arrays, together at least twice the LLC; read + write bytes,
    best of reps."""
    llc = llc_bytes() or 0
    nbytes = max(mib * 2**20, llc)
    avail = available_bytes()
    if avail:
        nbytes = min(nbytes, avail // 6)
    n = nbytes // 8
    src = np.full(n, 1.0)
    dst = np.full(n, 0.0)  # touched now, so no page fault lands in a timed copy
    best = float("inf")
    for _ in range(reps):
        t0 = time.perf_counter()
        np.copyto(dst, src)
        best = min(best, time.perf_counter() - t0)
    return 2 * n * 8 / best / 1e9


# -- CUDA device: copy bandwidth ------------------------------------------------------------
_CUDA_COPY = r"""
import json, cupy as cp
n = 1 << 28  # 1 GiB of float32 per array: far beyond any L2
a = cp.ones(n, dtype=cp.float32); b = cp.empty_like(a)
start, end = cp.cuda.Event(), cp.cuda.Event()
best = 1e30
for i in range(12):
    start.record(); cp.copyto(b, a); end.record(); end.synchronize()
    if i >= 2:
        best = min(best, cp.cuda.get_elapsed_time(start, end) / 1e3)
props = cp.cuda.runtime.getDeviceProperties(0)
name = props["name"].decode() if isinstance(props["name"], bytes) else str(props["name"])
clock = props.get("clockRate")  # kHz; CUDA 13 dropped it from the properties
if not clock:
    try:
        clock = cp.cuda.runtime.deviceGetAttribute(13, 0)  # cudaDevAttrClockRate, kHz
    except Exception:
        clock = None
print(json.dumps({"copy_gbps": 2 * a.nbytes / best / 1e9, "device": name,
                  "sm_count": props.get("multiProcessorCount"), "clock_khz": clock,
                  "cc": [props.get("major"), props.get("minor")]}))
"""

# FP32 lanes (CUDA cores) per SM by compute capability: Volta/Turing and the A100 (8.0)
# 64, the consumer Amperes, Ada and Hopper 128, Blackwell 128
FP32_LANES = {(7, 0): 64, (7, 2): 64, (7, 5): 64, (8, 0): 64, (8, 6): 128, (8, 7): 128,
              (8, 9): 128, (9, 0): 128, (10, 0): 128, (10, 3): 128, (12, 0): 128}


def fp32_peak_gflops(sm_count: int | None, clock_khz: int | None,
                     cc: tuple[int, int] | list[int] | None) -> float | None:
    """The FP32 FLOP rate the spec sheet quotes: SMs x FP32 lanes x 2 (an FMA) x the
    boost clock. None when a part is unknown (not a measurement: no kernel is run)."""
    lanes = FP32_LANES.get(tuple(cc)) if cc else None
    if not (sm_count and clock_khz and lanes):
        return None
    return sm_count * lanes * 2 * clock_khz / 1e6


class CudaPeaks(BaseModel):
    copy_gbps: float  # device-to-device copy, read + write bytes, best of 10
    device: str
    measured_at: str
    seconds: float
    method: str = "cupy.copyto of 1 GiB float32 arrays timed with CUDA events, best of 10"
    # the spec-sheet FP32 rate (fp32_peak_gflops): computed from the device's SM count,
    # compute capability and boost clock, not measured
    fp32_gflops: float | None = None
    sm_count: int | None = None
    clock_mhz: float | None = None


def cuda_peaks(backend, *, remeasure: bool = False) -> CudaPeaks:
    """Copy bandwidth of device 0, measured once per device in a sandboxed process."""
    import sys


    dev = backend.device_info()
    if not dev.ok:
        raise RuntimeError(f"no device: {dev.reason}")
    key = cache_key("cuda-peaks-v2", dev.name, dev.arch, dev.memory_bytes)
    path = cache_dir() / "peaks" / f"cuda-{key}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(path) + ".lock"):
        if path.exists() and not remeasure:
            try:
                return CudaPeaks.model_validate_json(path.read_text())
            except ValueError:
                pass

        t0 = time.monotonic()
        work = scratch_root() / f"cudapeaks-{uuid.uuid4().hex[:8]}"
        try:
            with bench_lock():
                run = run_confined([sys.executable, "-c", _CUDA_COPY], scratch=work,
                                   timeout_s=PEAKS_TIMEOUT_S, address_space_gib=64,
                                   env={"PYTHONPATH": os.pathsep.join(p for p in sys.path if p),
                                        **backend.worker_env()}, log_name="peaks")
        finally:
            shutil.rmtree(work, ignore_errors=True)
        if run.returncode != 0:
            raise RuntimeError(f"the copy benchmark failed: {run.describe()}")
        out = json.loads(run.stdout.strip().splitlines()[-1])
        clock = out.get("clock_khz")
        peaks = CudaPeaks(copy_gbps=out["copy_gbps"], device=out["device"],
                          measured_at=datetime.now(UTC).isoformat(timespec="milliseconds"),
                          seconds=round(time.monotonic() - t0, 3),
                          fp32_gflops=fp32_peak_gflops(out.get("sm_count"), clock,
                                                       out.get("cc")),
                          sm_count=out.get("sm_count"),
                          clock_mhz=clock / 1e3 if clock else None)
        path.write_text(peaks.model_dump_json(indent=2))
        return peaks


def describe(p: CpuPeaks) -> str:
    warm = f", cache-resident {p.triad_warm_gbps:.1f}" if p.triad_warm_gbps else ""
    read = (f", read-only sweep {p.read_gbps:.1f} GB/s (1 thread {p.read_1t_gbps or 0:.1f})"
            if p.read_gbps else "")
    return (f"triad {p.triad_gbps:.1f} GB/s ({p.threads} threads; 1 thread "
            f"{p.triad_1t_gbps:.1f}{warm}){read}, FMA {p.fma_gflops:.0f} GFLOP/s fp32, NumPy copy "
            f"{p.numpy_copy_gbps:.1f} GB/s (factor {p.numpy_factor:.2f})")


if __name__ == "__main__":  # python -m kernelcrew.tools.backends.peaks [--remeasure]
    import sys

    pk = cpu_peaks(remeasure="--remeasure" in sys.argv)
    print(describe(pk))
    print(pk.model_dump_json(indent=2))
