"""Gate honesty, measured on this machine.

(a) A library kernel checked against itself N times: the gate must say `same` at
    least N-1 times (it is the same code; any `faster`/`slower` is noise let through).
(b) The same kernel made 2x slower (it does every row twice; the second pass cannot be
    elided because the output may alias the input) checked N times: `slower` every
    time.
(c) A kernel summing each row through an out-of-line helper, checked against a
    baseline that calls the same helper once more on the first 15% of every row (see
    FAST15 / PLUS15), so it is about 1.15x faster on the typical and unaligned groups
    (the boundary group sits under the timing floor and counts as 1.0): `faster` at
    least N-2 times.

Every check is the real `kernelcrew.tools.judge.check.check()` with default settings
(fresh seeded inputs per check, 20 timed runs per case and kernel in 20 short
alternating rounds within one pair of sandboxed workers, the 10% minimum threshold),
so each one remakes its inputs and references and starts two workers.

    .venv/bin/python scripts/gate_honesty.py [--op scale_shift_sum] [--n 20]
        [--series abc] [--json out.json] [--markdown out.md]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

from kernelcrew.kernels.spec import load_op
from kernelcrew.tools.backends.cpu import cpu_threads
from kernelcrew.tools.config import BenchSettings, Limits
from kernelcrew.tools.judge.check import check

# scale_shift_sum's baseline, doing each row twice. `out` and `x` are not restrict, so
# the store between the passes may change x: the compiler must run the second pass.
TWICE = """/* kernelcrew
entry: scale_shift_sum
flags: [-O2]
*/
#include <cstdint>

// The baseline made 2x slower for the gate-honesty benchmark: every row is summed
// twice. out[i] is stored between the passes and may alias x, so the second pass
// cannot be elided.
extern "C" void scale_shift_sum(const float* x, float* out, float a, float b,
                                int64_t rows, int64_t cols) {
    for (int64_t i = 0; i < rows; ++i) {
        for (int pass = 0; pass < 2; ++pass) {
            float acc = 0.0f;
            for (int64_t j = 0; j < cols; ++j) {
                acc += a * x[i * cols + j] + b;
            }
            out[i] = acc;
        }
    }
}
"""


# The 1.15x pair. Both kernels sum each row through the same out-of-line helper, whose
# loop is one dependent float add per element (latency-bound at -O2, not memory-bound,
# so the work added is time added in the cold state too); the slower one calls it once
# more on the first 15% of the row, on data the first call just brought into cache.
# e - e is not folded to 0 without -ffast-math, so the second call stays.
ROW_HELPER = """/* kernelcrew
entry: scale_shift_sum
flags: [-O2]
*/
#include <cstdint>

// For the gate-honesty benchmark's 1.15x series: the row sum in a helper.
__attribute__((noinline)) static float row_sum(const float* x, int64_t n, float a, float b) {
    float acc = 0.0f;
    for (int64_t j = 0; j < n; ++j) {
        acc += a * x[j] + b;
    }
    return acc;
}

extern "C" void scale_shift_sum(const float* x, float* out, float a, float b,
                                int64_t rows, int64_t cols) {
    for (int64_t i = 0; i < rows; ++i) {
        out[i] = row_sum(x + i * cols, cols, a, b);%s
    }
}
"""
FAST15 = ROW_HELPER % ""
PLUS15 = ROW_HELPER % """
        const float e = row_sum(x + i * cols, cols * 15 / 100, a, b);
        out[i] += e - e;"""


def op_with_baseline(op: str, baseline_src: str, where: Path) -> Path:
    """A copy of the op's folder whose CPU baseline is `baseline_src`."""
    spec = load_op(op)
    dst = where / f"{spec.name}_slower_baseline"
    shutil.copytree(spec.folder, dst)
    (dst / spec.baselines["cpu"]).write_text(baseline_src)
    return dst


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def cpu_busy(seconds: float = 3.0) -> float:
    """Fraction of all cores busy over `seconds` (from /proc/stat), 0..1."""
    def sample() -> tuple[int, int]:
        vals = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
        idle = vals[3] + (vals[4] if len(vals) > 4 else 0)  # idle + iowait
        return sum(vals), idle

    t1, i1 = sample()
    time.sleep(seconds)
    t2, i2 = sample()
    return 1.0 - (i2 - i1) / max(1, t2 - t1)


def wait_for_quiet(threshold: float, max_wait_s: float) -> tuple[float, float]:
    """Wait until other work leaves the CPUs mostly idle; (busy fraction, seconds waited).

    Other people's jobs on a shared machine are noise the gate cannot see (its band
    comes from the spread inside each worker run), so checks start only when the
    machine is quiet; a check that had to start anyway is marked."""
    t0 = time.monotonic()
    while True:
        busy = cpu_busy()
        if busy <= threshold or time.monotonic() - t0 > max_wait_s:
            return busy, time.monotonic() - t0


def load() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "?"


def run_series(label: str, op: str, kernel: Path, n: int, bench: BenchSettings,
               quiet: float, max_wait_s: float) -> dict:
    rows = []
    for i in range(n):
        busy, waited = wait_for_quiet(quiet, max_wait_s)
        t0 = time.monotonic()
        load_before = load()
        res = check(op, kernel, "cpu", bench=bench, limits=Limits())
        rows.append({"verdict": res.verdict, "speedup": res.speedup, "band": res.noise_band,
                     "measured_noise": res.measured_noise, "load_before": load_before,
                     "groups": res.group_speedups, "reason": res.reason,
                     "busy_before": round(busy, 3), "waited_s": round(waited, 1),
                     "quiet": busy <= quiet, "load_after": load(),
                     "seconds": round(time.monotonic() - t0, 1)})
        sp = f"{res.speedup:.3f}x" if res.speedup else "-"
        band = f"±{res.noise_band:.1%}" if res.noise_band is not None else "-"
        noise = f"±{res.measured_noise:.1%}" if res.measured_noise is not None else "-"
        print(f"{label} {i + 1:2d}/{n}: {res.verdict:8s} {sp:>8s} band {band:>7s} "
              f"noise {noise:>7s}  "
              f"({rows[-1]['seconds']} s; busy before {busy:.0%} after waiting {waited:.0f} s; "
              f"load after {load()})", file=sys.stderr, flush=True)
        if res.verdict == "rejected":
            print(f"    rejected: {res.reason}", file=sys.stderr, flush=True)
    return summarize(label, rows)


def summarize(label: str, rows: list[dict]) -> dict:
    counts: dict[str, int] = {}
    for r in rows:
        counts[r["verdict"]] = counts.get(r["verdict"], 0) + 1
    sps = [r["speedup"] for r in rows if r["speedup"]]
    bands = [r["band"] for r in rows if r["band"] is not None]
    noise = [r["measured_noise"] for r in rows if r.get("measured_noise") is not None]
    groups: dict[str, list[float]] = {}
    for r in rows:
        for g, v in r["groups"].items():
            groups.setdefault(g, []).append(v)
    return {
        "label": label, "n": len(rows), "counts": counts,
        "speedup_median": statistics.median(sps) if sps else None,
        "speedup_min": min(sps) if sps else None, "speedup_max": max(sps) if sps else None,
        "band_median": statistics.median(bands) if bands else None,
        "band_min": min(bands) if bands else None, "band_max": max(bands) if bands else None,
        "noise_median": statistics.median(noise) if noise else None,
        "noise_min": min(noise) if noise else None, "noise_max": max(noise) if noise else None,
        "seconds_median": statistics.median(r["seconds"] for r in rows) if rows else None,
        "loads": [r["load_before"] for r in rows],
        "group_speedup_median": {g: statistics.median(v) for g, v in groups.items()},
        "seconds_total": round(sum(r["seconds"] for r in rows), 1),
        "quiet_starts": sum(1 for r in rows if r["quiet"]), "runs": rows,
    }


def markdown(meta: dict, series: list[dict]) -> str:
    lines = [
        (f"- machine: {meta['cpu']}, {meta['cores']} cores ({meta['threads']} used by "
        f"kernels), {meta['platform']}"),
        (f"- date: {meta['date']}; load average before/after: {meta['load_before']} / "
        f"{meta['load_after']}"),
        f"- settings: `check()` defaults: {meta['settings']}",
        f"- sandbox: {meta['sandbox']}",
        f"- quiet rule: {meta['quiet_rule']}; nice value of the checks: {meta['nice']}",
        "",
        ("| series | checks | quiet starts | same | slower | faster | rejected | median speedup "
        "| speedup range | median measured noise | noise range | median band | s per check |"),
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for s in series:
        c = s["counts"]
        lines.append(
            f"| {s['label']} | {s['n']} | {s['quiet_starts']} | {c.get('same', 0)} | "
            f"{c.get('slower', 0)} | "
            f"{c.get('faster', 0)} | {c.get('rejected', 0)} | {s['speedup_median']:.3f}x | "
            f"{s['speedup_min']:.3f}x - {s['speedup_max']:.3f}x | ±{s['noise_median']:.1%} | "
            f"±{s['noise_min']:.1%} - ±{s['noise_max']:.1%} | ±{s['band_median']:.1%} | "
            f"{s['seconds_median']:.0f} |")
    lines += ["", "| series | " + " | ".join(f"median {g} speedup" for g in
                                             series[0]["group_speedup_median"]) + " |",
              "|---|" + "---|" * len(series[0]["group_speedup_median"])]
    for s in series:
        lines.append(f"| {s['label']} | " + " | ".join(
            f"{v:.3f}x" for v in s["group_speedup_median"].values()) + " |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--op", default="scale_shift_sum")
    ap.add_argument("--n", type=int, default=20, help="checks per series (default 20)")
    ap.add_argument("--series", default="abc", help="which series to run (default abc)")
    ap.add_argument("--json", type=Path, help="write every check's numbers here")
    ap.add_argument("--markdown", type=Path, help="write the summary table here")
    ap.add_argument("--quiet", type=float, default=0.25,
                    help="start a check only when other work keeps less than this fraction "
                         "of the CPUs busy (default 0.25; 1 disables the wait)")
    ap.add_argument("--max-wait", type=float, default=900,
                    help="seconds to wait for a quiet machine before a check (default 900)")
    ap.add_argument("--nice", type=int, default=0,
                    help="run the checks (and their workers) at this nice value; a negative "
                         "one (root only) keeps other people's jobs on a shared machine from "
                         "preempting the timed runs")
    args = ap.parse_args(argv)
    if args.op != "scale_shift_sum":
        print("the 2x-slower kernel is written for scale_shift_sum", file=sys.stderr)
        return 2
    if os.environ.get("KERNELCREW_REPS"):
        print(f"note: KERNELCREW_REPS={os.environ['KERNELCREW_REPS']} overrides the default "
              "20 timed runs", file=sys.stderr)
    if args.nice:
        os.nice(args.nice)
    bench = BenchSettings()
    spec = load_op(args.op)
    baseline = spec.baseline_path("cpu")
    from kernelcrew.tools.sandbox import sandbox_description

    meta = {
        "cpu": cpu_model(), "cores": os.cpu_count(), "threads": cpu_threads(),
        "platform": platform.platform(), "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "settings": (f"reps={bench.reps} per case and kernel ({bench.reps // bench.rounds} "
                     "per round, one pair of workers), "
                     f"rounds={bench.rounds}, warmup={bench.warmup}, input_sets="
                     f"{bench.input_sets}, min_speedup={bench.min_speedup:.0%}, fresh seed "
                     "per check"),
        "sandbox": sandbox_description(), "load_before": load(),
        "nice": os.nice(0),
        "quiet_rule": (f"each check starts when other work keeps < {args.quiet:.0%} of the CPUs "
                       f"busy (3 s sample; waits up to {args.max_wait:.0f} s, else starts "
                       "anyway and counts as not quiet)"),
    }
    series = []
    verdicts: dict[str, tuple[str, int, int]] = {}  # series -> (verdict, count, needed)
    with tempfile.TemporaryDirectory() as tmp:
        twice = Path(tmp) / "scale_shift_sum_twice.cpp"
        twice.write_text(TWICE)
        if "a" in args.series:
            series.append(run_series("(a) baseline vs itself", args.op, baseline, args.n,
                                     bench, args.quiet, args.max_wait))
            verdicts["a"] = ("same", series[-1]["counts"].get("same", 0), args.n - 1)
        if "b" in args.series:
            series.append(run_series("(b) baseline done twice (2x slower)", args.op, twice,
                                     args.n, bench, args.quiet, args.max_wait))
            verdicts["b"] = ("slower", series[-1]["counts"].get("slower", 0), args.n)
        if "c" in args.series:
            slow_op = op_with_baseline(args.op, PLUS15, Path(tmp))
            fast = Path(tmp) / "scale_shift_sum_row_helper.cpp"
            fast.write_text(FAST15)
            series.append(run_series("(c) row helper vs one doing 15% more work (1.15x)",
                                     str(slow_op), fast, args.n, bench, args.quiet,
                                     args.max_wait))
            verdicts["c"] = ("faster", series[-1]["counts"].get("faster", 0), args.n - 2)
    meta["load_after"] = load()
    table = markdown(meta, series)
    print(table)
    if args.markdown:
        args.markdown.write_text(table)
    if args.json:
        args.json.write_text(json.dumps({"meta": meta, "series": series}, indent=2))
    ok = all(got >= need for _, got, need in verdicts.values())
    print(("PASS" if ok else "FAIL") + ": " + ", ".join(
        f"({k}) {v} {got}/{args.n} (need >= {need})" for k, (v, got, need) in verdicts.items()))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
