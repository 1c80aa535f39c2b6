"""Part 8: functions imported unchanged from public C code bases (issue 39).

Each code base (kernelcrew/evals/bench/codebases.py) is fetched at bench time at its
pinned commit, or found in a local folder; each function is imported with `--case` and
the code base's own include folders and -D switches, the heuristic crew optimizes it on
the CPU, and then, side by side in one harness: the baseline as imported (-O2), the
compiler alone (g++ -O3 -march=native on the same code), clang -O3 -march=native,
clang+Polly, the crew's best; NumPy's spelling in its own process; the share of the
roofline. A missing compiler or code base is skipped with a note.
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from kernelcrew.errors import InputError
from kernelcrew.evals import peers as P
from kernelcrew.evals import suite as S
from kernelcrew.evals.bench.codebases import CODEBASES, CodeBase, Function, commit_of, locate
from kernelcrew.evals.bench.section import BenchRun, Section, fmt, status
from kernelcrew.evals.peers.cache_state import case_bounds, roofline_share
from kernelcrew.evals.peers.compilers import PeerCompilerBackend, compiler_peers
from kernelcrew.evals.peers.side_by_side import compiler_alone, time_side_by_side
from kernelcrew.kernels.importer.derive import (
    ImportRequest,
    import_function,
    parse_assignments,
    parse_case,
    parse_defines,
)
from kernelcrew.kernels.kernelfile import load_kernel
from kernelcrew.kernels.spec import load_op

WALL_S = 180.0  # the crew's wall-clock budget per imported function
PEERS = ("compiler alone", "clang -O3", "clang+Polly")
GEOMEAN_GOAL, EACH_GOAL, NUMPY_WITHIN = 4.0, 1.5, 2.0


@dataclass
class CodeBaseRow:
    codebase: str
    function: str
    kind: str
    op: str
    folder: str = ""
    ms: dict[str, float | None] = field(default_factory=dict)  # label -> typical ms
    case_ms: dict[str, dict[str, float]] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)
    commands: dict[str, str] = field(default_factory=dict)  # label -> compiler command
    numpy_ms: float | None = None
    numpy_expression: str | None = None
    roofline: dict[str, float | None] = field(default_factory=dict)
    crew_speedup: float | None = None  # the crew's gate speedup over the baseline
    crew_kind: str = ""
    crew_stop: str = ""

    def over(self, peer: str, label: str = "crew") -> float | None:
        """How many times faster `label` is than `peer` (peer time / its time)."""
        a, c = self.ms.get(peer), self.ms.get(label)
        return a / c if a and c else None


def march() -> str:
    """What `gcc -march=native` means on this machine (`-march=znver3`)."""
    try:
        r = subprocess.run(["gcc", "-march=native", "-Q", "--help=target"],
                           capture_output=True, text=True, timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    for ln in r.stdout.splitlines():
        parts = ln.split()
        if parts and parts[0] == "-march=" and len(parts) > 1:
            return f"-march={parts[1]}"
    return "unknown"


def _request(cb: CodeBase, fn: Function, root: Path, out: Path) -> ImportRequest:
    flags: dict[str, list[str]] = {}
    args = list(fn.args)
    for k in range(0, len(args) - 1, 2):
        flags.setdefault(args[k], []).append(args[k + 1])
    return ImportRequest(
        source=root / fn.file, function=fn.function, cases=[parse_case(fn.case)],
        shapes=parse_assignments(flags.get("--shape", []), "--shape"),
        scalars=parse_assignments(flags.get("--scalar", []), "--scalar"),
        defines=parse_defines(flags.get("--define", [])),
        include_dirs=[root / d for d in flags.get("--include-dir", [])],
        out=out, name=cb.op_name(fn), force=True)


def _import(b: BenchRun, cb: CodeBase, fn: Function, root: Path) -> CodeBaseRow:
    from kernelcrew.tools.judge.calibrate import calibrate

    row = CodeBaseRow(cb.name, fn.function, fn.kind, cb.op_name(fn))
    out = b.work / "codebases" / row.op
    try:
        res = import_function(_request(cb, fn, root, out))
        calibrate(res.folder)
    except InputError as e:
        row.errors["import"] = str(e)[:300]
        return row
    row.folder = str(res.folder)
    return row


def _side_by_side(b: BenchRun, row: CodeBaseRow, crew: S.OpRow | None, peers) -> None:
    spec = load_op(row.folder)
    base = load_kernel(spec.baseline_path("cpu"))
    kernels = {"baseline": base, "compiler alone": compiler_alone(base)}
    row.commands["compiler alone"] = "g++ " + " ".join(compiler_alone(base).meta.flags)
    compilers = {}
    for peer in peers:
        kernels[peer.label] = base
        compilers[peer.label] = PeerCompilerBackend(peer)
        row.commands[peer.label] = peer.command(base)
    if crew and crew.correct and crew.best_path:
        kernels["crew"] = load_kernel(crew.best_path)
        row.crew_speedup, row.crew_kind, row.crew_stop = crew.speedup, crew.best_kind, \
            crew.stop_reason
    elif crew:
        row.errors["crew"] = crew.error or "the crew's best was not correct"
    timed = time_side_by_side(spec, kernels, reps=b.settings.reps, seed=b.settings.seed or 0,
                              compilers=compilers)
    for label, t in timed.items():
        row.ms[label], row.case_ms[label] = t.typical_ms, t.case_ms
        if t.error:
            row.errors[label] = t.error[:300]
    npr = P.numpy_peer(row.folder, reps=b.settings.reps)
    row.numpy_ms, row.numpy_expression = npr.typical_ms, npr.expression
    if npr.error and not npr.error.startswith("no NumPy expression for"):
        row.errors["NumPy"] = npr.error[:300]
    peaks = b.data.get("peaks")
    if peaks is not None:
        # the measured FMA peak is float32's; a float64 function has half of it
        f64 = all(t.dtype == "float64" for t in [*spec.inputs.values(), *spec.outputs.values()])
        bounds = case_bounds(spec, peaks.gflops / (2 if f64 else 1), b.work / "probes",
                             reps=b.settings.reps, seed=b.settings.seed or 0)
        row.roofline = {k: roofline_share(bounds, row.case_ms.get(k, {})) for k in row.ms}


def run(b: BenchRun) -> None:
    peers, notes = compiler_peers()
    wanted = set(b.options.get("codebase_functions") or [])
    rows: list[CodeBaseRow] = []
    found: dict[str, str] = {}
    for cb in CODEBASES:
        fns = [f for f in cb.functions if not wanted or cb.op_name(f) in wanted]
        if not fns:
            continue
        root, how = locate(cb, b.options.get("codebases"))
        if root is None:
            notes.append(f"{how}: its functions are skipped")
            continue
        at = commit_of(root)
        found[cb.name] = f"{cb.url} at {(at or 'unknown')[:12]} ({how})"
        if at and at != cb.commit:
            notes.append(f"{cb.name}: the local copy is at {at[:12]}, not the pinned "
                         f"{cb.commit[:12]}")
        for fn in fns:
            b.say(f"part 8: importing {fn.function} from {cb.name}")
            rows.append(_import(b, cb, fn, root))
    ok = [r for r in rows if r.folder]
    crew_rows: dict[str, S.OpRow] = {}
    if ok:
        settings = dataclasses.replace(
            b.settings, ops=[r.folder for r in ok], runs_dir=str(b.work / "codebase-runs"),
            wall_budget_s=b.options.get("codebase_wall_s") or WALL_S)
        b.say(f"part 8: the crew on {len(ok)} imported functions")
        suite = S.run_suite(settings, say=b.say)
        crew_rows = {r.op: r for r in suite.rows}
        b.runs_for_overhead.extend(suite.rows)
    for k, r in enumerate(ok, 1):
        b.say(f"part 8 [{k}/{len(ok)}]: {r.op} side by side ({', '.join(PEERS)}, crew; "
              "NumPy; roofline)")
        _side_by_side(b, r, crew_rows.get(r.op), peers)
        (b.work / "codebases-partial.json").write_text(
            json.dumps([asdict(x) for x in rows], indent=1, default=str))
        b.say(f"{r.op}: " + ", ".join(f"{lb} {fmt(ms, '{:.4g}')} ms" for lb, ms in r.ms.items())
              + f", NumPy {fmt(r.numpy_ms, '{:.4g}')} ms")
    b.data["codebases"] = {"rows": rows, "notes": notes, "found": found, "march": march(),
                           "peers": [p.label for p in peers]}


# ---------------------------------------------------------------- report

def _ms(r: CodeBaseRow, label: str) -> str:
    if r.ms.get(label) is None:
        return "failed" if label in r.errors else "-"
    return fmt(r.ms[label], "{:.4g}")


def behind(r: CodeBaseRow) -> list[str]:
    """Where the crew is short of a goal on this function, with the numbers."""
    out = []
    x = r.over("compiler alone")
    if x is None or x < EACH_GOAL:
        out.append(f"{fmt(x, '{:.2f}x')} over the compiler alone")
    for peer in ("clang -O3", "clang+Polly"):
        y = r.over(peer)
        if y is not None and y < 1:
            out.append(f"{peer} {1 / y:.2f}x ahead")
    if r.numpy_ms and r.ms.get("crew") and r.ms["crew"] > NUMPY_WITHIN * r.numpy_ms:
        out.append(f"{r.ms['crew'] / r.numpy_ms:.1f}x NumPy's time")
    return out


def render(data: dict[str, Any]) -> list[str]:
    d = data.get("codebases")
    if not d:
        return []
    rows: list[CodeBaseRow] = d["rows"]
    L = ["## 8. Functions imported from public C code bases (issue 39)\n"]
    add = L.append
    add(f"Machine: `gcc -march=native` is `{d.get('march')}`. Code bases: "
        + ("; ".join(f"{k}: {v}" for k, v in d.get("found", {}).items()) or "none found")
        + ". Each function imported unchanged with `kernelcrew import --case` (and the code "
        "base's include folders and -D switches), optimized by the heuristic crew, then "
        "timed side by side in one harness (sums of the typical cases' medians, ms; every "
        "kernel first verified on every shape group): the baseline as imported (-O2), the "
        "*compiler alone* (`g++ -O3 -march=native`, plus -fopenmp where the code has "
        "OpenMP pragmas), *clang -O3* and *clang+Polly* on the same code, the *crew*'s best. "
        "*NumPy*: its spelling of the function, in its own process. Ratios: how many times "
        "faster the crew is (peer time / crew time); *crew ÷ NumPy* is crew time over NumPy "
        "time (under 1: the crew is faster). *roofline*: the least time the peaks allow "
        "over the crew's time (float64 functions against half the float32 FMA peak).\n")
    table = []
    for r in rows:
        if "import" in r.errors:
            table.append([r.codebase, f"{r.function} ({r.kind})", "import failed"] + ["-"] * 10)
            continue
        table.append([r.codebase, f"{r.function} ({r.kind})", _ms(r, "baseline"),
                      _ms(r, "compiler alone"), _ms(r, "clang -O3"), _ms(r, "clang+Polly"),
                      _ms(r, "crew"), fmt(r.numpy_ms, "{:.4g}"),
                      fmt(r.over("compiler alone"), "{:.2f}x"),
                      fmt(r.over("clang -O3"), "{:.2f}x"), fmt(r.over("clang+Polly"), "{:.2f}x"),
                      fmt(r.ms["crew"] / r.numpy_ms if r.numpy_ms and r.ms.get("crew")
                          else None, "{:.2f}"),
                      fmt(r.roofline.get("crew"), "{:.0%}")])
    add(S.markdown_table(["code base", "function", "baseline", "compiler alone", "clang -O3",
                          "clang+Polly", "crew", "NumPy", "crew ÷ compiler alone",
                          "crew ÷ clang -O3", "crew ÷ Polly", "crew ÷ NumPy (time)",
                          "crew roofline"], table))
    add("")
    lag = [(r, behind(r)) for r in rows if "import" not in r.errors]
    lag = [(r, why) for r, why in lag if why]
    if lag:
        add("Where the crew is behind (what its moves would need to see, for the next "
            "round of moves): " + "; ".join(f"{r.codebase} {r.function}: {', '.join(why)} "
                                            f"(best: {r.crew_kind or 'baseline'})"
                                            for r, why in lag) + ".\n")
    errs = [f"{r.op} {k}: {v}" for r in rows for k, v in r.errors.items()]
    if errs:
        add("Errors: " + "; ".join(e[:240] for e in errs) + ".\n")
    for n in d.get("notes", []):
        add(f"- {n}")
    if d.get("notes"):
        add("")
    return L


def goals(data: dict[str, Any]) -> list[list[str]]:
    d = data.get("codebases")
    if not d:
        return []
    rows: list[CodeBaseRow] = d["rows"]
    n = len(rows)
    if not n:
        return [["issue 39 (imported code bases)", "-", "no code base found",
                 "**not measured**"]]
    correct = [r for r in rows if r.ms.get("crew")]
    ratios = [r.over("compiler alone") or 1.0 for r in rows]
    gm = S.geomean(ratios)
    short = [f"{r.function} {fmt(r.over('compiler alone'), '{:.2f}x')}" for r in rows
             if (r.over("compiler alone") or 0) < EACH_GOAL]
    peers = [(r, p) for r in rows for p in ("clang -O3", "clang+Polly") if r.ms.get(p)]
    lost = [f"{r.function} vs {p}" for r, p in peers if (r.over(p) or 0) < 1]
    np_rows = [r for r in rows if r.numpy_ms]
    far = [r.function for r in np_rows if not r.ms.get("crew")
           or r.ms["crew"] > NUMPY_WITHIN * r.numpy_ms]
    return [
        ["imported functions correct, crew's best correct (39)", f"{n} of {n}",
         f"{len(correct)} of {n}", status(len(correct) == n, "see part 8's errors")],
        ["geomean over compiler alone on imported functions (39)", f">= {GEOMEAN_GOAL:g}x",
         fmt(gm, "{:.2f}x"), status(gm is not None and gm >= GEOMEAN_GOAL,
                                    f"{GEOMEAN_GOAL - (gm or 0):.2f}x short")],
        [f"none under {EACH_GOAL:g}x over compiler alone (39)", f"{n} of {n}",
         f"{n - len(short)} of {n}", status(not short, "; ".join(short))],
        ["crew ahead of clang -O3 and clang+Polly on every function they build (39)",
         f"{len(peers)} of {len(peers)}", f"{len(peers) - len(lost)} of {len(peers)}",
         status(not lost, "; ".join(lost)) if peers else "**not measured**: no clang"],
        [f"crew within {NUMPY_WITHIN:g}x of NumPy where NumPy expresses it (39)",
         f"{len(np_rows)} of {len(np_rows)}", f"{len(np_rows) - len(far)} of {len(np_rows)}",
         status(not far, ", ".join(far))],
    ]


SECTION = Section("codebases", render, run, goals)
