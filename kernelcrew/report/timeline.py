"""A run directory read back: its trace as a timeline, its status, its speedup history.

Only files are read (context.json, trace.jsonl, result.json); a run that was killed
half-way reads too, with what it has. `kernelcrew runs`, `kernelcrew show` and the
reports are built from these functions.
"""

from __future__ import annotations

import json
import re
import shutil
import textwrap
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

from kernelcrew.errors import InputError
from kernelcrew.kernels.formats import FORMATS
from kernelcrew.trace import read_trace, runs_root

Status = Literal["finished", "failed", "running-or-killed"]

# where a node's event goes within its iteration, in the order a reader follows them
_PHASE = {"observe": "observe", "specialist": "specialists", "plan": "specialists",
          "coordinator": "coordinator", "execute": "work", "revise": "work", "verify": "work",
          "benchmark": "work", "gate": "gate", "reflect": "reflections"}


def read_json(path: Path) -> Any:
    """A JSON file, or None when it is missing or cut short by a kill."""
    try:
        return json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):
        return None


@dataclass
class Run:
    """What a run directory holds, read once."""

    dir: Path
    context: dict[str, Any]  # context.json: the run's settings, run_id, operator folder
    result: dict[str, Any] | None  # result.json; None until finalize ran
    events: list[dict[str, Any]]  # trace.jsonl, one event per node execution

    @property
    def run_id(self) -> str:
        return str(self.context.get("run_id") or self.dir.name)

    @property
    def op(self) -> str:
        if self.result and self.result.get("op"):
            return str(self.result["op"])
        return Path(str(self.context.get("operator", "?"))).name

    @property
    def backend(self) -> str:
        if self.result and self.result.get("backend"):
            return str(self.result["backend"])
        for fmt in FORMATS.values():  # the run's baseline file names its backend
            if (self.dir / f"baseline{fmt.suffix}").exists():
                return fmt.backend
        return str(self.context.get("backend", "?"))

    @property
    def suffix(self) -> str:
        """The ending of the run's kernel files (baseline, best, candidates)."""
        fmt = FORMATS.get(self.backend)
        return fmt.suffix if fmt else ".cpp"

    def nodes(self, node: str) -> list[dict[str, Any]]:
        return [e for e in self.events if e.get("node") == node]


def load_run(run_dir: str | Path) -> Run:
    run_dir = Path(run_dir)
    return Run(dir=run_dir, context=read_json(run_dir / "context.json") or {},
               result=read_json(run_dir / "result.json"), events=read_trace(run_dir))


def run_status(run: Run) -> Status:
    """finished: result.json written and the best kernel correct; failed: the run ended
    without a correct best, or the trace records an error; otherwise still running or
    killed (a killed run can be continued with `kernelcrew optimize --resume RUN`)."""
    if run.result is not None:
        return "finished" if run.result.get("best", {}).get("correct") else "failed"
    if any(e.get("node") == "error" for e in run.events):
        return "failed"
    return "running-or-killed"


def run_started(run: Run) -> datetime:
    """When the run began: its first trace event, else when context.json was written."""
    for e in run.events:
        try:
            return datetime.fromisoformat(e["time"]).astimezone()
        except (KeyError, TypeError, ValueError):
            continue
    path = run.dir / "context.json"
    stamp = path.stat().st_mtime if path.exists() else run.dir.stat().st_mtime
    return datetime.fromtimestamp(stamp).astimezone()


def run_device(run: Run) -> str:
    """The machine the run measured on, from the baseline event's summary."""
    for e in run.nodes("baseline"):
        m = re.search(r" on (.+): typical total", e.get("summary", ""))
        if m:
            return m.group(1)
    return run.backend


@dataclass
class Iteration:
    """One iteration's events, grouped in the order of the loop."""

    number: int
    observe: list[dict] = field(default_factory=list)
    specialists: list[dict] = field(default_factory=list)  # specialist (and re-plan) events
    coordinator: list[dict] = field(default_factory=list)
    work: list[dict] = field(default_factory=list)  # execute, revise, verify, benchmark
    gate: list[dict] = field(default_factory=list)
    reflections: list[dict] = field(default_factory=list)
    other: list[dict] = field(default_factory=list)  # nodes this reader does not know


@dataclass
class Timeline:
    baseline: list[dict]
    iterations: list[Iteration]
    finalize: list[dict]
    other: list[dict]  # events outside any iteration (e.g. an error)


def build_timeline(events: list[dict[str, Any]]) -> Timeline:
    iters: dict[int, Iteration] = {}
    tl = Timeline([], [], [], [])
    for e in events:
        node = e.get("node")
        if node == "baseline":
            tl.baseline.append(e)
        elif node == "finalize":
            tl.finalize.append(e)
        elif node in _PHASE or int(e.get("iteration") or 0) > 0:
            n = int(e.get("iteration") or 0)
            it = iters.setdefault(n, Iteration(n))
            getattr(it, _PHASE.get(str(node), "other")).append(e)
        else:
            tl.other.append(e)
    tl.iterations = [iters[k] for k in sorted(iters)]
    return tl


@dataclass
class CandidateTrack:
    """One candidate kernel as the trace tells it."""

    path: str
    iteration: int
    author: str
    outcome: str = "pending"  # from its reflection; pending until one is written
    vs_best: float | None = None  # from its benchmark: speed relative to the best then
    speedup: float | None = None  # vs the baseline, chained through the best it raced
    compile_ok: bool | None = None
    correct: bool | None = None


@dataclass
class SpeedupHistory:
    candidates: list[CandidateTrack]
    best_line: list[tuple[int, float]]  # (iteration, best speedup after its gate); 0 = baseline


def speedup_history(events: list[dict[str, Any]]) -> SpeedupHistory:
    """Each candidate's speedup vs the baseline and the best-so-far after every gate.

    Speedups are chained the way the gate chains them: a candidate's speed relative to the
    best it raced, times that best's speedup over the baseline."""
    cands: dict[str, CandidateTrack] = {}
    best, line = 1.0, [(0, 1.0)]

    def track(e: dict) -> CandidateTrack | None:
        path = (e.get("refs") or {}).get("kernel") or e.get("about")
        if not path:
            return None
        if path not in cands:
            cands[path] = CandidateTrack(path, int(e.get("iteration") or 0),
                                         str(e.get("agent") or "?"))
        return cands[path]

    for e in events:
        node = e.get("node")
        if node in ("execute", "verify", "benchmark", "reflect"):
            c = track(e)
            if c is None:
                continue
            if node == "execute":
                c.compile_ok = bool(e.get("ok"))
            elif node == "verify":
                c.correct = bool(e.get("correct"))
            elif node == "benchmark":
                c.vs_best = e.get("vs_best")
                c.speedup = best * c.vs_best if c.vs_best else None
            else:
                c.outcome = str(e.get("outcome") or "?")
        elif node == "gate":
            won = cands.get(e.get("accepted") or "")
            if won is not None and won.speedup:
                best = won.speedup
            line.append((int(e.get("iteration") or 0), best))
    for c in cands.values():
        if c.outcome == "pending" and c.compile_ok is False:
            # replaced by a revision (its own file), or the run stopped right here
            c.outcome = "compile-error"
    return SpeedupHistory(list(cands.values()), line)


def best_speedup(run: Run) -> float | None:
    """The final race's speedup once finished, else the best-so-far from the trace."""
    if run.result is not None:
        return run.result.get("best", {}).get("speedup")
    line = speedup_history(run.events).best_line
    return line[-1][1] if len(line) > 1 else None


def iterations_done(run: Run) -> int:
    if run.result is not None and run.result.get("iterations") is not None:
        return int(run.result["iterations"])
    return len({e.get("iteration") for e in run.events if e.get("node") == "gate"})


def run_summary(run: Run) -> dict[str, Any]:
    """One row of `kernelcrew runs`."""
    return {"run_id": run.run_id, "operator": run.op, "backend": run.backend,
            "status": run_status(run), "speedup": best_speedup(run),
            "iterations": iterations_done(run), "date": run_started(run).isoformat(),
            "stop_reason": (run.result or {}).get("stop_reason"), "run_dir": str(run.dir)}


def list_runs(root: str | Path, limit: int | None = 20) -> list[dict[str, Any]]:
    """The runs under `root`, newest first."""
    root = Path(root)
    if not root.is_dir():
        return []
    runs = [run_summary(load_run(d)) for d in root.iterdir() if (d / "context.json").exists()]
    runs.sort(key=lambda r: r["date"], reverse=True)
    return runs[:limit] if limit else runs


def _artifact(ref: str, run_dir: Path, sub: str) -> Path:
    """A referenced file; the trace may hold a path relative to where the run started."""
    p = Path(ref)
    return p if p.exists() else run_dir / sub / p.name


def proposals_of(e: dict[str, Any], run_dir: Path) -> list[dict[str, Any]]:
    """The proposals a specialist event refers to (proposals/*.json), in order."""
    refs = {k: v for k, v in (e.get("refs") or {}).items() if k.startswith("proposal")}
    out = []
    for k in sorted(refs, key=lambda k: int(k[len("proposal"):] or 0)):
        d = read_json(_artifact(refs[k], run_dir, "proposals"))
        if isinstance(d, dict):
            out.append(d)
    return out


def proposal_line(d: dict[str, Any]) -> str:
    """One proposal in a line: kind, expected gain, confidence, plan."""
    ch = d.get("change") or {}
    return (f"{ch.get('kind', '?')} (x{float(d.get('expected_gain') or 0):.2f}, conf "
            f"{float(d.get('confidence') or 0):.1f}): {d.get('plan', '')}")


def observation_of(e: dict[str, Any], run_dir: Path) -> str:
    """The observation in full: bottleneck, its evidence and the profile's summary (the
    trace's own summary is cut short)."""
    ref = (e.get("refs") or {}).get("profile")
    prof = read_json(_artifact(ref, run_dir, "profiles")) if ref else None
    if not isinstance(prof, dict):
        return str(e.get("summary", ""))
    b = prof.get("bottleneck") or {}
    n = len(e.get("reflections") or [])
    return (f"{b.get('kind', '?')}: {b.get('evidence', '')} Profile ({prof.get('case')}): "
            f"{prof.get('summary', '')}. {n} reflection(s) recalled.")


def best_through(history: SpeedupHistory, iteration: int) -> float:
    """The best-so-far speedup once `iteration`'s gate ran (or the latest before it)."""
    return max(((it, s) for it, s in history.best_line if it <= iteration),
               default=(0, 1.0))[1]


def candidates_in(it: Iteration, history: SpeedupHistory) -> int:
    """How many candidates the coordinator sent to evaluation (revisions not counted)."""
    sent = [len(e.get("candidates") or []) for e in it.coordinator]
    if sent:
        return sum(sent)
    return len([c for c in history.candidates if c.iteration == it.number])


def find_run_dir(ref: str, runs_dir: str | Path | None = None) -> Path:
    """A run directory from a run directory path or a run id (the folder of that name under
    the runs root, else the run there whose context.json has that id).

    The same lookup as `graph.runner.find_run`, without importing the graph: `show` and
    `report` stay quick."""

    p = Path(ref)
    if (p / "context.json").exists():
        return p.resolve()
    root = Path(runs_dir or runs_root())
    if (root / ref / "context.json").exists():
        return root / ref
    for d in sorted(root.iterdir()) if root.is_dir() else []:
        if (read_json(d / "context.json") or {}).get("run_id") == ref:
            return d
    raise InputError(f"no run {ref!r} under {root}; give a run id from `kernelcrew runs` or a "
                     "run directory")


# ---------------------------------------------------------------- terminal rendering


def _fmt_x(v: float | None) -> str:
    return f"{v:.2f}x" if v else "n/a"


def header_lines(run: Run) -> list[str]:
    res = run.result or {}
    best = res.get("best", {})
    lines = [(f"run {run.run_id}: {run.op} on {run.backend}, {run_status(run)}, best "
             f"{_fmt_x(best_speedup(run))}, {iterations_done(run)} iteration(s)"),
             f"  device: {run_device(run)}",
             f"  started: {run_started(run):%Y-%m-%d %H:%M:%S %Z}"]
    if res:
        lines.append(f"  stop: {res.get('stop_reason')}")
        lines.append(f"  best kernel: {best.get('path')} (by {best.get('author')}, "
                     f"{best.get('kind')}, iteration {best.get('iteration')}; "
                     f"{best.get('reason')})")
    lines.append(f"  dir: {run.dir}")
    return lines


def _event_line(e: dict, width: int, *, text: str | None = None, first: bool = True
                ) -> list[str]:
    node = str(e.get("node"))
    agent = str(e.get("agent") or "")
    if agent == node or agent in ("gate", "coordinator", "reflector"):
        agent = ""
    if node == "reflect":
        agent = str(e.get("outcome") or "")
    if len(agent) > 16:  # a merged candidate's authors: a+b+c
        agent = agent[:14] + ".."
    tokens = sum(v for v in (e.get("tokens") or {}).values() if isinstance(v, int))
    tail = f"  [{tokens} tokens]" if tokens else ""
    dur = f"{float(e.get('duration_s') or 0):>6.1f}s" if first else " " * 7
    head = f"  {node:<12} {agent:<16} {dur}  "
    text = f"{e.get('summary', '') if text is None else text}{tail if first else ''}"
    return textwrap.wrap(text, width=max(width, len(head) + 30), initial_indent=head,
                         subsequent_indent=" " * len(head)) or [head]


def render_text(run: Run, width: int | None = None) -> str:
    """The run as a readable terminal timeline."""
    width = width or shutil.get_terminal_size((110, 24)).columns
    tl = build_timeline(run.events)
    history = speedup_history(run.events)
    out = header_lines(run)
    out.append("")
    for e in tl.baseline:
        out += _event_line(e, width)
    for it in tl.iterations:
        n_c = candidates_in(it, history)
        title = (f"-- iteration {it.number}: {n_c} candidate(s), best so far "
                 f"{_fmt_x(best_through(history, it.number))} ")
        out += ["", title + "-" * max(0, min(width, 100) - len(title))]
        for e in it.observe:
            out += _event_line(e, width)
        for e in it.specialists:
            props = proposals_of(e, run.dir) if e.get("node") == "specialist" else []
            for k, d in enumerate(props):
                out += _event_line(e, width, text=proposal_line(d), first=not k)
            if not props:
                out += _event_line(e, width)
        for e in it.coordinator:
            out += _event_line(e, width)
            for why in e.get("rejected") or []:
                out += textwrap.wrap(f"not taken: {why}", width=width,
                                     initial_indent=" " * 39, subsequent_indent=" " * 41)
        for e in it.work + it.gate + it.reflections + it.other:
            out += _event_line(e, width)
    for e in tl.other:
        out += _event_line(e, width)
    out.append("")
    if tl.finalize:
        for e in tl.finalize:
            out += _event_line(e, width)
    elif run.result:
        out.append(f"  finished: {run.result.get('stop_reason')}")
    else:
        out.append("  (no finalize event: the run is still going, or was killed; "
                   "continue it with `kernelcrew optimize --resume RUN`)")
    return "\n".join(out)


def timeline_json(run: Run) -> dict[str, Any]:
    """`kernelcrew show --json`: the same timeline as data."""
    tl = build_timeline(run.events)
    return {**run_summary(run), "device": run_device(run), "baseline": tl.baseline,
            "iterations": [{"iteration": it.number, "observe": it.observe,
                            "specialists": it.specialists, "coordinator": it.coordinator,
                            "work": it.work, "gate": it.gate, "reflections": it.reflections,
                            "other": it.other} for it in tl.iterations],
            "finalize": tl.finalize, "other": tl.other, "result": run.result}
