"""The eval suite: the crew on a set of operators with a fixed budget, as one table.

Per operator: baseline and best time (sum of the typical cases' medians, ms), the crew's
speedup (the gate's weighted geometric mean over all shape groups, best vs baseline raced
side by side), the share of the roofline bound reached, correctness, evaluations, wall
time and tokens. Summary: the geometric-mean speedup and fast_p, the share of operators
whose best kernel is correct and at least p times faster (p = 1, 1.5, 2).

The trace helpers here (the evaluation sequence, the overhead split) read a run directory
alone, so the bench and tests can use them on any finished run.
"""

from __future__ import annotations

import math
import platform
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from kernelcrew.errors import InputError
from kernelcrew.evals.peers import bound_for, machine_peaks, typical_cases
from kernelcrew.graph.context import RunContext
from kernelcrew.graph.nodes.setup import new_run_id
from kernelcrew.graph.runner import optimize
from kernelcrew.kernels.formats import format_for
from kernelcrew.kernels.spec import library_ops, load_op
from kernelcrew.tools.backends.backend import get_backend
from kernelcrew.tools.backends.compile import tool_version
from kernelcrew.tools.backends.cpu import CXX, cpu_threads
from kernelcrew.tools.config import BenchSettings
from kernelcrew.trace import read_trace

FAST_P = (1.0, 1.5, 2.0)
MEMORY_MODES = ("off", "fresh", "shared")
# nodes that compile, run or time kernels; everything else the crew does is overhead
MEASURE_NODES = frozenset({"baseline", "observe", "execute", "verify", "benchmark", "finalize"})
AGENT_NODES = frozenset({"specialist", "coordinator", "reflect", "revise", "gate"})
# emitted inside another node's span (a specialist re-planning): not counted twice
NESTED_NODES = frozenset({"plan"})

Say = Callable[[str], None]


@dataclass(kw_only=True)
class EvalSettings:
    """How the suite runs the crew."""

    ops: list[str] = field(default_factory=library_ops)  # library names or folders
    backend: str = "cpu"
    agents: str = "heuristic"
    budget: int = 8  # maximum iterations per operator
    # timed runs per case and kernel: the default of check and optimize (20, or
    # $KERNELCREW_REPS), so a table's races have the noise a user's run has
    reps: int = field(default_factory=lambda: BenchSettings().reps)
    memory: str = "off"  # off: no memory | fresh: an empty store per op | shared: memory_dir
    memory_dir: str | None = None  # the store for memory=shared (and the root for fresh)
    memory_embedding: str = "auto"  # auto (the store's own; new: minilm, else hashed) | ...
    runs_dir: str | None = None  # default: a new temporary folder
    seed: int | None = 0  # inputs seed, the same for every op (None: fresh)
    wall_budget_s: float | None = None  # per operator; None: the crew's default
    patience: int | None = None
    specialists: list[str] | None = None
    executor: str = "local"  # local: one operator after another | ray: several at once
    ray_address: str | None = None
    parallel: int | None = None  # crews at once (default: 1 local, every operator on ray)


@dataclass
class OpRow:
    """One operator's line of the table."""

    op: str
    family: str = ""
    baseline_ms: float | None = None  # typical cases, sum of medians
    best_ms: float | None = None
    speedup: float | None = None  # the crew's gate speedup (all groups, weighted geomean)
    typical_speedup: float | None = None  # baseline_ms / best_ms
    bound_ms: float | None = None  # roofline bound of the typical cases
    roofline_share: float | None = None  # bound_ms / best_ms
    correct: bool = False
    evaluations: int = 0
    compile_errors: int = 0
    iterations: int = 0
    wall_s: float = 0.0
    tokens: int = 0
    stop_reason: str = ""
    best_kind: str = ""  # what the best kernel's last accepted change was
    run_id: str = ""
    run_dir: str = ""
    best_path: str = ""
    memory_dir: str = ""  # the store the run read and wrote, when memory was on
    rows: list[dict] = field(default_factory=list)  # the final race's per-case rows
    error: str = ""  # the run failed: why


@dataclass
class SuiteResult:
    settings: dict[str, Any]
    machine: dict[str, Any]
    rows: list[OpRow]
    summary: dict[str, Any]
    started: str
    seconds: float

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


# ---------------------------------------------------------------- metrics


def geomean(xs: list[float]) -> float | None:
    xs = [x for x in xs if x is not None and x > 0]
    return math.exp(sum(map(math.log, xs)) / len(xs)) if xs else None


def fast_p(rows: list[OpRow], p: float) -> float:
    """Share of operators whose best kernel is correct and at least p times faster."""
    if not rows:
        return 0.0
    return sum(1 for r in rows if r.correct and r.speedup is not None and r.speedup >= p) / len(rows)


def summarize(rows: list[OpRow]) -> dict[str, Any]:
    # a run that failed or ended incorrect leaves the user with the baseline: 1.0x
    speedups = [r.speedup if r.correct and r.speedup else 1.0 for r in rows]
    return {
        "operators": len(rows),
        "correct": sum(r.correct for r in rows),
        "geomean_speedup": geomean(speedups),
        "fast_p": {f"{p:g}": fast_p(rows, p) for p in FAST_P},
        "evaluations": sum(r.evaluations for r in rows),
        "wall_s": round(sum(r.wall_s for r in rows), 1),
        "tokens": sum(r.tokens for r in rows),
    }


# ---------------------------------------------------------------- the machine


# the SIMD extensions that decide what the compiler can emit, widest last
ISA_FLAGS = ("sse4_2", "avx", "avx2", "fma", "avx512f", "avx512bw", "avx512vl", "avx512_bf16",
             "avx512_fp16", "amx_tile", "asimd", "sve", "sve2")


def cpu_isa(cpuinfo: str | None = None) -> str:
    """The SIMD ISA of this CPU from /proc/cpuinfo's flags (x86) or Features (Arm), as
    `avx2 fma` or `avx2 fma avx512f ...`; "unknown" where they cannot be read."""
    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text()
        except OSError:
            return "unknown"
    for line in cpuinfo.splitlines():
        key, _, val = line.partition(":")
        if key.strip() in ("flags", "Features"):
            have = set(val.split())
            return " ".join(f for f in ISA_FLAGS if f in have) or "none of " + "/".join(ISA_FLAGS)
    return "unknown"


def machine_info(backend: str = "cpu") -> dict[str, Any]:
    model = platform.processor() or ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    info = {"cpu": model, "isa": cpu_isa(), "cores": cpu_threads(),
            "compiler": tool_version(CXX),
            "python": sys.version.split()[0], "platform": platform.platform(),
            "backend": backend}
    try:
        import numpy

        info["numpy"] = numpy.__version__
    except ImportError:
        pass
    try:
        info["load_avg"] = [round(x, 2) for x in __import__("os").getloadavg()]
    except OSError:
        pass
    if format_for(backend).code == "device":  # kernels that run on a device: name it
        try:
            info["gpu"] = get_backend(backend).describe()
        except ImportError as e:  # the backend's extra is not installed
            info["gpu"] = f"unknown ({e})"
    return info


# ---------------------------------------------------------------- trace analysis


def evaluation_sequence(run_dir: str | Path) -> list[dict[str, Any]]:
    """The candidates the crew evaluated, in order: one per verify event, with the
    benchmark verdict and per-case rows where it was timed."""
    events = read_trace(run_dir)
    bench = {}
    for e in events:
        if e.get("node") == "benchmark":
            bench[(e.get("refs") or {}).get("kernel")] = e
    seq = []
    for e in events:
        if e.get("node") != "verify":
            continue
        k = (e.get("refs") or {}).get("kernel")
        b = bench.get(k, {})
        seq.append({"kernel": k, "iteration": e.get("iteration"), "agent": e.get("agent"),
                    "correct": bool(e.get("correct")), "verdict": b.get("verdict"),
                    "vs_best": b.get("vs_best"), "rows": b.get("rows") or []})
    return seq


def accepted_trajectory(run_dir: str | Path, result: dict) -> list[tuple[int, float, str]]:
    """(evaluation number, speedup over the baseline, kernel) of every accepted candidate.

    The evaluation number counts the candidates evaluated (verified) up to the end of the
    accepted one's iteration: the gate chooses only after racing every candidate of the
    iteration, so all of them were spent to get there, whatever their order."""
    seq = evaluation_sequence(run_dir)
    upto: dict[Any, int] = {}
    for i, s in enumerate(seq, 1):
        upto[s["iteration"]] = i
    order = {s["kernel"]: upto[s["iteration"]] for s in seq}
    out = []
    for a in result.get("accepted", []):
        n = order.get(a.get("path"))
        if n is not None and a.get("speedup"):
            out.append((n, float(a["speedup"]), a["path"]))
    return sorted(out)


def evals_to_reach(trajectory: list[tuple[int, float, str]], speedup: float) -> int | None:
    """Evaluations until an accepted candidate reached the speedup (0: the baseline did)."""
    if speedup <= 1.0:
        return 0
    for n, s, _ in trajectory:
        if s >= speedup:
            return n
    return None


def overhead_split(run_dir: str | Path, wall_s: float) -> dict[str, Any]:
    """How a run's wall time divides into measuring kernels and everything else.

    Measurement: the nodes that compile, run or time kernels (baseline, observe with its
    profiling run, execute, verify, benchmark, finalize). Overhead: the agents' nodes
    (specialists, coordinator, gate decision, reflect, revise) plus wall time covered by no
    node at all (graph scheduling, checkpoints, process start). Parallel specialists of one
    iteration count once, by the longest of them.
    """
    by_node: dict[str, float] = {}
    spec_by_iter: dict[int, float] = {}
    for e in read_trace(run_dir):
        node, d = e.get("node"), float(e.get("duration_s") or 0.0)
        if node in NESTED_NODES:
            continue
        if node == "specialist":
            it = int(e.get("iteration") or 0)
            spec_by_iter[it] = max(spec_by_iter.get(it, 0.0), d)
            continue
        by_node[node] = by_node.get(node, 0.0) + d
    by_node["specialist"] = sum(spec_by_iter.values())
    measure = sum(v for k, v in by_node.items() if k in MEASURE_NODES)
    agents = sum(v for k, v in by_node.items() if k in AGENT_NODES)
    other = sum(v for k, v in by_node.items() if k not in MEASURE_NODES | AGENT_NODES)
    uncovered = max(0.0, wall_s - measure - agents - other)
    overhead = agents + other + uncovered
    return {"wall_s": round(wall_s, 3), "measure_s": round(measure, 3),
            "agents_s": round(agents + other, 3), "uncovered_s": round(uncovered, 3),
            "overhead_s": round(overhead, 3),
            "overhead_share": overhead / wall_s if wall_s > 0 else None,
            "by_node": {k: round(v, 3) for k, v in sorted(by_node.items())}}


# ---------------------------------------------------------------- running the crew


def run_context(settings: EvalSettings, run_dir: Path, memory_dir: str | None) -> Any:
    ctx = RunContext(backend=settings.backend, agents=settings.agents,
                     max_iters=settings.budget, reps=settings.reps, run_dir=str(run_dir),
                     use_memory=settings.memory != "off", memory_dir=memory_dir,
                     memory_embedding=settings.memory_embedding, seed=settings.seed,
                     specialists=settings.specialists,
                     executor=settings.executor, ray_address=settings.ray_address)
    if settings.wall_budget_s:
        ctx.wall_budget_s = settings.wall_budget_s
    if settings.patience:
        ctx.patience = settings.patience
    return ctx


def run_operator(op: str, settings: EvalSettings, runs_dir: Path, *, peaks: Any = None,
                 memory_dir: str | None = None, say: Say | None = None) -> OpRow:
    """One crew run on one operator, as a table row (a failed run is a row with its error)."""

    say = say or (lambda _m: None)
    try:
        spec = load_op(op)
    except InputError as e:
        return OpRow(op=str(op), error=str(e))
    row = OpRow(op=spec.name, family=spec.family)
    run_id = new_run_id(spec.name)
    run_dir = runs_dir / run_id
    if settings.memory == "fresh":
        memory_dir = str(Path(memory_dir or runs_dir / "memory") / run_id)
    elif settings.memory == "shared":
        memory_dir = memory_dir or settings.memory_dir
    ctx = run_context(settings, run_dir, memory_dir)
    row.memory_dir = (memory_dir or "") if ctx.use_memory else ""

    def progress(ev: dict) -> None:
        if ev.get("node") in ("gate", "finalize", "baseline"):
            say(f"{spec.name} iter {ev.get('iteration', 0)}: {ev.get('summary', '')[:110]}")

    t0 = time.monotonic()
    try:
        result = optimize(str(spec.folder), ctx, progress=progress, run_id=run_id)
    except Exception as e:  # noqa: BLE001 - one op's failure is a row, the suite goes on
        row.wall_s = round(time.monotonic() - t0, 1)
        row.error = f"{type(e).__name__}: {str(e).splitlines()[0][:300] if str(e) else ''}"
        row.run_dir = str(run_dir)
        say(f"{spec.name}: run failed: {row.error}")
        return row
    row.wall_s = round(time.monotonic() - t0, 1)
    best = result.get("best", {})
    table = result.get("table", [])
    typ = [r for r in table if r.get("group") == "typical"]
    if typ and all(r.get("median_ms") and r.get("baseline_ms") for r in typ):
        row.baseline_ms = sum(r["baseline_ms"] for r in typ)
        row.best_ms = sum(r["median_ms"] for r in typ)
        row.typical_speedup = row.baseline_ms / row.best_ms
    row.speedup = best.get("speedup")
    row.correct = bool(best.get("correct"))
    row.evaluations = int(result.get("evaluations") or 0)
    row.compile_errors = int(result.get("compile_errors") or 0)
    row.iterations = int(result.get("iterations") or 0)
    row.tokens = int((result.get("tokens") or {}).get("total_tokens", 0))
    row.stop_reason = result.get("stop_reason", "")
    row.best_kind = f"{best.get('author')}/{best.get('kind')}"
    row.run_id, row.run_dir = result.get("run_id", run_id), result.get("run_dir", str(run_dir))
    row.best_path = best.get("path", "")
    row.rows = table
    if peaks is not None and row.best_ms:
        b = bound_for(spec, [c.sizes for c in typical_cases(spec)], peaks, row.best_ms)
        row.bound_ms, row.roofline_share = b.bound_ms, b.bound_share
    sp = f"{row.speedup:.2f}x" if row.speedup else "n/a"
    say(f"{spec.name}: {sp}, correct {row.correct}, {row.evaluations} evaluations, "
        f"{row.wall_s:.0f} s ({row.stop_reason})")
    return row


def run_suite(settings: EvalSettings, *, say: Say | None = None,
              after_op: Callable[[OpRow], None] | None = None) -> SuiteResult:
    """Run the crew on every operator in turn; `after_op` sees each row as it lands."""

    say = say or (lambda _m: None)
    started = datetime.now(UTC).isoformat(timespec="seconds")
    t0 = time.monotonic()
    if settings.memory not in MEMORY_MODES:
        raise InputError(f"memory mode {settings.memory!r}: choose one of {MEMORY_MODES}")
    runs_dir = Path(settings.runs_dir or tempfile.mkdtemp(prefix="kernelcrew-eval-"))
    runs_dir.mkdir(parents=True, exist_ok=True)
    try:
        peaks = machine_peaks(settings.backend)
    except Exception as e:  # noqa: BLE001 - the table goes on without a roofline column
        say(f"no machine peaks, no roofline column: {type(e).__name__}: {e}")
        peaks = None
    parallel = settings.parallel or (len(settings.ops) if settings.executor == "ray" else 1)

    def one(k: int, op: str) -> OpRow:
        say(f"[{k}/{len(settings.ops)}] optimizing {op} (budget {settings.budget} iterations)")
        row = run_operator(op, settings, runs_dir, peaks=peaks, memory_dir=settings.memory_dir,
                           say=say)
        if after_op is not None:
            after_op(row)
        return row

    if parallel <= 1:
        rows = [one(k, op) for k, op in enumerate(settings.ops, 1)]
    else:  # several crews at once: their evaluations share the executor's cluster
        with ThreadPoolExecutor(max_workers=parallel, thread_name_prefix="crew") as pool:
            rows = list(pool.map(one, range(1, len(settings.ops) + 1), settings.ops))
    settings_d = {**asdict(settings), "runs_dir": str(runs_dir)}
    machine = machine_info(settings.backend)
    if peaks is not None:
        machine["peaks"] = asdict(peaks)
    return SuiteResult(settings_d, machine, rows, summarize(rows), started,
                       round(time.monotonic() - t0, 1))


# ---------------------------------------------------------------- rendering


def _f(v: Any, fmt: str = "{:.3g}") -> str:
    if v is None:
        return "-"
    if isinstance(v, bool):
        return "yes" if v else "NO"
    if isinstance(v, float):
        return fmt.format(v)
    return str(v)


TABLE_HEADERS = ["operator", "baseline ms", "best ms", "speedup", "roofline", "correct",
                 "evals", "iters", "wall s", "tokens"]


def table_cells(r: OpRow) -> list[str]:
    return [r.op, _f(r.baseline_ms), _f(r.best_ms),
            _f(r.speedup, "{:.2f}x"), _f(r.roofline_share, "{:.0%}"),
            _f(r.correct) if not r.error else f"failed: {r.error[:60]}", str(r.evaluations),
            str(r.iterations), _f(r.wall_s, "{:.0f}"), str(r.tokens)]


def summary_line(s: dict[str, Any]) -> str:
    fp = ", ".join(f"fast_{p} = {v:.0%}" for p, v in s["fast_p"].items())
    gm = s["geomean_speedup"]
    return (f"geomean speedup {gm:.2f}x over {s['operators']} operators" if gm else
            "geomean speedup n/a") + f"; {fp}; {s['correct']}/{s['operators']} correct"


def markdown_table(headers: list[str], rows: list[list[str]]) -> str:
    out = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    out += ["| " + " | ".join(c.replace("|", "/") for c in r) + " |" for r in rows]
    return "\n".join(out)
