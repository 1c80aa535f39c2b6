"""Cold-cache bandwidth shares of the whole library, as `kernelcrew profile` reports them.

For every library op, three kernels are profiled through the real CLI with `--cache cold`
(the last-level cache flushed before each timed run): the baseline, the compiler alone
(the baseline at -O3 -march=native, -fopenmp where it has pragmas) and the hand-written
fast kernel under tests/kernels/. Each profile's case, cache state, achieved bandwidth,
the bandwidth peak for the op's mix of reads and writes, and the share are tabulated. A
share above 100% would mean the peak is not a ceiling: the script says so and exits 1.

    .venv/bin/python scripts/cold_roofline.py [--ops matvec qmatvec] [--markdown out.md]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path

from kernelcrew.evals.peers.side_by_side import compiler_alone, fast_kernel_path
from kernelcrew.evals.suite import machine_info
from kernelcrew.kernels.kernelfile import load_kernel
from kernelcrew.kernels.spec import library_ops, load_op
from kernelcrew.tools.backends.peaks import cpu_peaks, describe


def profile(op: str, path: Path) -> dict:
    out = subprocess.run([sys.executable, "-m", "kernelcrew.cli", "profile", op, str(path),
                          "--cache", "cold", "--json"], capture_output=True, text=True,
                         timeout=600, check=False)
    if out.returncode != 0:
        return {"error": (out.stderr.strip().splitlines() or ["failed"])[-1][:200]}
    doc = json.loads(out.stdout)
    m = doc["metrics"]
    return {"case": doc["case"], "cache": doc["cache"],
            "gbps": m["achieved_bandwidth"]["value"], "peak": m["peak_bandwidth"]["value"],
            "pct": m["bandwidth_pct"]["value"], "summary": doc["summary"]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ops", nargs="*", default=None)
    ap.add_argument("--markdown", default=None)
    args = ap.parse_args()
    ops = args.ops or library_ops()
    pk = cpu_peaks(remeasure=True)
    rows, over = [], []
    with tempfile.TemporaryDirectory() as tmp:
        for op in ops:
            spec = load_op(op)
            base = spec.baseline_path("cpu")
            alone = Path(tmp) / f"{op}-compiler-alone.cpp"
            alone.write_text(compiler_alone(load_kernel(base)).text)
            kernels = {"baseline": base, "compiler alone": alone}
            fast = fast_kernel_path(op)
            if fast is not None:
                kernels["hand-written"] = fast
            for label, path in kernels.items():
                r = profile(op, path)
                print(f"{op:16s} {label:15s} " + (
                    f"{r['case']}: {r['gbps']:.1f} of {r['peak']:.1f} GB/s = {r['pct']:.0f}% "
                    f"({r['cache']})" if "error" not in r else r["error"]), flush=True)
                rows.append((op, label, r))
                if "error" not in r and r["pct"] is not None and r["pct"] > 100:
                    over.append(f"{op} {label} {r['pct']:.0f}%")
    if args.markdown:
        mi = machine_info("cpu")
        lines = [
            "# Cold-cache bandwidth shares of the library\n",
            (f"`scripts/cold_roofline.py`, {datetime.now(UTC):%Y-%m-%d %H:%M} UTC. Machine: "
             f"{mi['cpu']}, {mi['isa']}, {mi['cores']} CPUs, {mi['compiler']}. Peaks measured "
             f"at the start: {describe(pk)}.\n"),
            ("Every kernel profiled with `kernelcrew profile OP FILE --cache cold --json` (the "
             "last-level cache flushed before each timed run, the peaks measured on arrays of "
             "twice the last-level cache). The peak is the one for the op's mix of reads and "
             "writes: between the read-only sweep (nothing written) and the triad (a third "
             "written), by the share of the cost model's bytes that are outputs.\n"),
            "| operator | kernel | case | cache | GB/s | peak for its mix GB/s | share |",
            "|---|---|---|---|---|---|---|"]
        for op, label, r in rows:
            if "error" in r:
                lines.append(f"| {op} | {label} | {r['error']} | | | | |")
            else:
                lines.append(f"| {op} | {label} | {r['case']} | {r['cache']} | {r['gbps']:.1f} "
                             f"| {r['peak']:.1f} | {r['pct']:.0f}% |")
        lines.append("")
        lines.append("Shares above 100%: " + (", ".join(over) if over else "none") + ".\n")
        Path(args.markdown).write_text("\n".join(lines))
    if over:
        print("above the peak: " + ", ".join(over))
        return 1
    print("no share above 100%")
    return 0


if __name__ == "__main__":
    sys.exit(main())
