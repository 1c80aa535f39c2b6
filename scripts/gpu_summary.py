"""The summary lines of scripts/gpu_check.sh: one tab-separated line (stage, item, status,
detail) per thing the script ran, read from that thing's log, and the summary files at the
end. Kept apart from the shell script so the CPU tests can run it.

    python scripts/gpu_summary.py check LOG OP KIND COPY_GBPS     -> one line
    python scripts/gpu_summary.py profile LOG LABEL HOW           -> one line
    python scripts/gpu_summary.py optimize LOG OP RC              -> one line
    python scripts/gpu_summary.py peers JSON COPY_GBPS            -> one line per op
    python scripts/gpu_summary.py render TSV SECONDS OUT_DIR      -> summary.txt, .md, .json

Status words: ok, FAIL, ERROR, info, planned (a dry run), `skipped: ...` (no GPU, the time
budget, a stage not asked for). The issue-43 goals are checked where the numbers allow:
memory-bound kernels at 85% or more of the copy bandwidth, fused add_gelu_muladd at 2.5x
its three-launch baseline or more, matmul-like kernels at half of cuBLAS or more, the
crew ahead of CuPy.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

BANDWIDTH_GOAL = 0.85
FUSION_GOAL = 2.5
CUBLAS_GOAL = 0.5
COMPUTE_FAMILIES = {"matmul", "attention", "convolution"}
MATMUL_LIKE = {"small_matmul", "attention", "conv2d", "matvec", "matvec_t"}


def _json_after(text: str) -> dict | None:
    """The JSON document a `--json` command printed (after any progress lines)."""
    start = text.find("{")
    while start >= 0:
        try:
            return json.loads(text[start:])
        except ValueError:
            start = text.find("\n{", start + 1)
            start = start + 1 if start >= 0 else -1
    return None


def _last(text: str) -> str:
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    return (lines[-1] if lines else "no output")[:160]


def line(stage: str, item: str, status: str, detail: str = "") -> str:
    clean = [str(x).replace("\t", " ").replace("\n", " ").replace("\r", "")
             for x in (stage, item, status, detail)]
    return "\t".join(clean)


def _geomean(xs: list[float]) -> float | None:
    xs = [x for x in xs if x and x > 0]
    return math.exp(sum(map(math.log, xs)) / len(xs)) if xs else None


def check_line(text: str, op: str, kind: str, copy_gbps: float, *,
               cost_bytes: dict[str, int] | None = None, family: str = "") -> str:
    """`kernelcrew check --json` of a kernel -> a line. `cost_bytes`: case label -> the
    cost model's bytes (for the achieved bandwidth of the typical cases)."""
    item = f"{op} {kind}"
    d = _json_after(text)
    if d is None:
        return line("check", item, "ERROR", _last(text))
    if not d.get("ran", True):
        regs = ",".join(f"{k['kernel']}:{k['registers']}" for k in
                        (d.get("compile") or {}).get("resources", []))
        return line("check", item, "skipped: no GPU", f"compiled only; registers {regs}")
    if d.get("verdict") == "rejected" or not d.get("correct"):
        return line("check", item, "FAIL", f"{d.get('verdict')}: {str(d.get('reason'))[:150]}")
    rates = [cost_bytes[r["case"]] / (r["median_ms"] / 1e3) / 1e9 for r in d.get("rows", [])
             if r.get("group") == "typical" and r.get("median_ms") and cost_bytes
             and r.get("case") in cost_bytes]
    gbps = _geomean(rates)
    sp = f"{d['speedup']:.2f}x" if d.get("speedup") else "n/a"
    detail = f"correct (baseline too); {d['verdict']} {sp} vs baseline"
    if gbps:
        detail += f"; typical {gbps:.0f} GB/s"
        if copy_gbps:
            detail += f" = {100 * gbps / copy_gbps:.0f}% of copy"
            if kind == "fast" and family not in COMPUTE_FAMILIES:
                met = gbps >= BANDWIDTH_GOAL * copy_gbps
                detail += f" (goal {BANDWIDTH_GOAL:.0%}: {'met' if met else 'NOT met'})"
    if kind == "fast" and op == "add_gelu_muladd" and d.get("speedup"):
        met = d["speedup"] >= FUSION_GOAL
        detail += f" (fused goal {FUSION_GOAL}x: {'met' if met else 'NOT met'})"
    return line("check", item, "ok", detail)


def profile_line(text: str, label: str, how: str) -> str:
    d = _json_after(text)
    if d is None:
        return line("profile", label, "FAIL", _last(text))
    want = "ncu" if how == "ncu" else "cuda-fallback"
    status = "ok" if d.get("source") == want else f"FAIL (source {d.get('source')}, wanted {want})"
    m = d.get("metrics", {})

    def v(k: str) -> str:
        x = (m.get(k) or {}).get("value")
        return "n/a" if x is None else f"{x:.3g}"

    return line("profile", label, status,
                f"{(d.get('bottleneck') or {}).get('kind')}; dram {v('dram_throughput_pct')}%; "
                f"sectors/req ld {v('l1_ld_sectors_per_request')}; {str(d.get('summary'))[:90]}")


def optimize_line(text: str, op: str, rc: str) -> str:
    d = _json_after(text)
    if d is None:
        return line("crew", op, "FAIL", f"rc={rc} {_last(text)}")
    if not d.get("ran", True):
        cands = d.get("candidates", [])
        ok = sum(1 for c in cands if c.get("outcome") == "not-run")
        kinds = ",".join(sorted({c.get("kind", "?") for c in cands}))[:90]
        return line("crew", op, "skipped: no GPU", f"{ok} candidates compiled, not run ({kinds})")
    b = d.get("best") or {}
    sp = f"{b['speedup']:.2f}x" if b.get("speedup") else "n/a"
    acc = ",".join(e.get("kind", "?") for e in d.get("accepted", []))[:80] or "none"
    shapes = sorted({r.get("group") for r in d.get("table", []) if r.get("group")})
    return line("crew", op, "ok", f"best {sp} (correct {b.get('correct')}) after "
                f"{d.get('iterations')} iterations; accepted: {acc}; groups "
                f"{'/'.join(shapes) or '?'}; stop: {str(d.get('stop_reason'))[:50]}")


def peers_lines(data: dict, copy_gbps: float) -> list[str]:
    """cuda_peers.py's JSON -> one line per op, with the goals that apply to it."""
    out = []
    for r in data.get("rows", []):
        op = r["op"]
        if r.get("skipped"):
            out.append(line("peers", op, "skipped: no GPU" if "no device" in r["skipped"]
                            else "skipped", r["skipped"]))
            continue
        ms, sh = r.get("ms", {}), r.get("shares", {})
        parts = [f"{k} {ms[k]:.4g} ms" for k in ("baseline", "hand-written", "crew", "CuPy")
                 if ms.get(k)]
        status = "ok"
        for k in ("hand-written", "crew"):
            s = sh.get(k) or {}
            if s.get("bandwidth") is not None and r.get("limit") == "bandwidth":
                met = s["bandwidth"] >= BANDWIDTH_GOAL
                parts.append(f"{k} {100 * s['bandwidth']:.0f}% of copy "
                             f"({'met' if met else 'NOT met'})")
            elif s.get("compute") is not None:
                parts.append(f"{k} {100 * s['compute']:.0f}% of FP32")
        cupy = ms.get("CuPy")
        for k in ("hand-written", "crew"):
            if cupy and ms.get(k):
                vs = cupy / ms[k]
                note = f"{k} vs CuPy {vs:.2f}x"
                if op in MATMUL_LIKE:
                    note += f" (half of cuBLAS: {'met' if vs >= CUBLAS_GOAL else 'NOT met'})"
                parts.append(note)
        if r.get("errors"):
            status = "FAIL" if any(k in r["errors"] for k in ("baseline", "hand-written",
                                                            "run")) else "ok"
            parts.append("errors: " + "; ".join(f"{k}: {v[:60]}" for k, v in
                                                r["errors"].items()))
        out.append(line("peers", op, status, "; ".join(parts)))
    return out


def render(tsv: Path, seconds: str, out_dir: Path) -> str:
    """The summary table (summary.txt), the same as markdown (summary.md) and as JSON
    (summary.json, with the goals' counts); returns the text."""
    rows = [(ln.rstrip("\n").split("\t") + [""] * 4)[:4]
            for ln in tsv.read_text().splitlines() if ln.strip()]
    head = ["stage", "item", "status", "detail"]
    w = [max([len(head[i]), *(len(r[i]) for r in rows)]) for i in range(3)]

    def fmt(r: list[str]) -> str:
        return "  ".join(r[i].ljust(w[i]) for i in range(3)) + "  " + r[3]

    bad = [r for r in rows if r[2].startswith(("FAIL", "ERROR"))]
    skipped = [r for r in rows if r[2].startswith("skipped")]
    goals_met = sum(r[3].count("met)") - r[3].count("NOT met)") for r in rows)
    goals_missed = sum(r[3].count("NOT met)") for r in rows)
    text = "\n".join(["== kernelcrew GPU check (issue 43) ==", fmt(head),
                      "  ".join("-" * x for x in w) + "  " + "-" * 6, *map(fmt, rows),
                      (f"-- {len(rows)} lines, {len(bad)} failed, {len(skipped)} skipped; "
                      f"goals met {goals_met}, not met {goals_missed}; {seconds} s; logs: "
                      f"{out_dir}/gpu-check.tar.gz")]) + "\n"
    (out_dir / "summary.txt").write_text(text)
    md = ["| stage | item | status | detail |", "|---|---|---|---|"]
    md += ["| " + " | ".join(c.replace("|", "/") for c in r) + " |" for r in rows]
    (out_dir / "summary.md").write_text("\n".join(md) + "\n")
    (out_dir / "summary.json").write_text(json.dumps({
        "seconds": seconds, "failed": len(bad), "skipped": len(skipped),
        "goals_met": goals_met, "goals_not_met": goals_missed,
        "rows": [dict(zip(head, r, strict=True)) for r in rows]}, indent=1))
    return text


def _cost_bytes(op: str) -> tuple[dict[str, int], str]:
    from kernelcrew.kernels.spec import load_op

    spec = load_op(op, "cuda")
    return {c.label: spec.cost_bytes(c.sizes) for c in spec.cases()}, spec.family


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__, file=sys.stderr)
        return 2
    kind, args = argv[0], argv[1:]
    try:
        if kind == "check":
            log, op, which, bw = args
            costs, family = _cost_bytes(op)
            print(check_line(Path(log).read_text(errors="replace"), op, which, float(bw or 0),
                             cost_bytes=costs, family=family))
        elif kind == "profile":
            log, label, how = args
            print(profile_line(Path(log).read_text(errors="replace"), label, how))
        elif kind == "optimize":
            log, op, rc = args
            print(optimize_line(Path(log).read_text(errors="replace"), op, rc))
        elif kind == "peers":
            path, bw = args
            p = Path(path)
            if not p.exists():
                print(line("peers", "all", "ERROR", f"{p.name} was not written"))
                return 0
            for ln in peers_lines(json.loads(p.read_text()), float(bw or 0)):
                print(ln)
        elif kind == "render":
            tsv, seconds, out = args
            print(render(Path(tsv), seconds, Path(out)), end="")
        else:
            print(f"gpu_summary.py: unknown kind {kind!r}; use check, profile, optimize, "
                  "peers or render", file=sys.stderr)
            return 2
    except ValueError as e:  # wrong number of arguments
        print(f"gpu_summary.py {kind}: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
