"""Record and replay: the answers of a recorded run, looked up by agent, step and prompt.

Every LLM call of a run is saved as `<run_dir>/llm/<iteration>-<agent>-<n>.json` with the
prompt it was built from (`prompt`: the messages before the structured-output method and
the chat template shaped them) and the answer. A replay answers each request from the
recording of the same agent and step whose prompt matches, in recorded order.

Prompts are compared with every number masked: the profile and the benchmark are measured
again in a replayed run, and their timings never repeat to the last digit; any other
difference (a changed prompt template, another kernel, other rules) is a miss. A miss
reports what differs from the nearest recorded prompt of that agent and step, as a short
diff, and then either stops the run (`ReplayMiss`, a clean stop) or goes to the live
endpoint (`replay_missing="live"`).
"""

from __future__ import annotations

import difflib
import json
import re
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kernelcrew.errors import AgentUnavailable, InputError

_NUMBER = re.compile(r"[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?")
_HEX = re.compile(r"\b[0-9a-f]{8,}\b")
DIFF_LINES = 12


def prompt_text(messages: list[Any]) -> str:
    """The prompt as recorded: role and text of each message, before shaping."""
    return "\n".join(f"[{getattr(m, 'type', 'user')}]\n{getattr(m, 'content', m)}"
                     for m in messages)


def mask(text: str) -> str:
    return _NUMBER.sub("#", _HEX.sub("<hex>", text))


class ReplayMiss(AgentUnavailable):
    """A request with no recorded answer (the run stops cleanly, or goes live)."""

    def __init__(self, message: str, report: dict[str, Any]) -> None:
        super().__init__(message)
        self.report = report


@dataclass
class Recording:
    run_dir: Path
    records: list[dict[str, Any]]
    used: set[int] = field(default_factory=set)
    misses: list[dict[str, Any]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @classmethod
    def open(cls, run_dir: str | Path) -> Recording:
        with _CACHE_LOCK:
            key = str(Path(run_dir).resolve())
            if key in _CACHE:
                return _CACHE[key]
            folder = Path(run_dir) / "llm"
            if not folder.is_dir():
                raise InputError(f"{folder} does not exist: the run to replay has no recorded "
                                 "LLM calls", field="replay")
            recs = []
            for f in sorted(folder.glob("*.json"), key=_order):
                try:
                    r = json.loads(f.read_text())
                except (OSError, json.JSONDecodeError):
                    continue
                if r.get("response") is None and not r.get("replayed"):
                    continue  # the call failed: nothing was answered
                if r.get("prompt") is None:
                    continue  # recorded before prompts were kept
                r["file"] = str(f)
                r["_masked"] = mask(r["prompt"])
                recs.append(r)
            rec = _CACHE[key] = cls(run_dir=Path(run_dir), records=recs)
            return rec

    def take(self, agent: str, step: str, prompt: str) -> dict[str, Any] | None:
        """The next unused recorded answer for this agent, step and prompt."""
        m = mask(prompt)
        with self.lock:
            for i, r in enumerate(self.records):
                if i in self.used or r.get("agent") != agent or r.get("step") != step:
                    continue
                if r["_masked"] == m:
                    self.used.add(i)
                    return r
        return None

    def miss(self, agent: str, step: str, iteration: int, prompt: str) -> ReplayMiss:
        """What differs from the nearest recorded prompt of this agent and step."""
        same = [r for r in self.records if r.get("agent") == agent and r.get("step") == step]
        pool = same or [r for r in self.records if r.get("agent") == agent] or self.records
        m = mask(prompt)
        best = max(pool, key=lambda r: difflib.SequenceMatcher(
            None, r["_masked"], m, autojunk=False).quick_ratio(), default=None)
        diff: list[str] = []
        nearest = None
        if best is not None:
            nearest = best["file"]
            lines = difflib.unified_diff(best["prompt"].splitlines(), prompt.splitlines(),
                                         "recorded", "now", n=0, lineterm="")
            diff = [ln for ln in lines if not ln.startswith(("---", "+++", "@@"))
                    and mask(ln[1:]).strip() != ""]
            diff = [ln for ln in diff if not _only_numbers(ln, diff)][:DIFF_LINES]
        report = {"agent": agent, "step": step, "iteration": iteration, "nearest": nearest,
                  "diff": diff, "recorded_for_step": len(same)}
        with self.lock:
            self.misses.append(report)
        was = next((d[1:] for d in diff if d.startswith("-")), "")
        now = next((d[1:] for d in diff if d.startswith("+")), "")
        what = (f"nearest recorded prompt {Path(nearest).name} differs: recorded "
                f"{was[:120]!r}, now {now[:120]!r}" if nearest else "nothing recorded for it")
        return ReplayMiss(f"replay of {self.run_dir.name}: no recorded answer for {agent} "
                          f"{step} (iteration {iteration}); {what}", report)


def _only_numbers(line: str, diff: list[str]) -> bool:
    """A -/+ pair that differs in numbers only (measured again) is not a difference."""
    other = ("+" if line.startswith("-") else "-") + line[1:]
    return mask(other) in {mask(d) for d in diff if d[:1] != line[:1]}


def _order(f: Path) -> tuple[int, str, int]:
    parts = f.stem.split("-")
    try:
        return int(parts[0]), "-".join(parts[1:-1]), int(parts[-1])
    except (ValueError, IndexError):
        return 0, f.stem, 0


_CACHE: dict[str, Recording] = {}
_CACHE_LOCK = threading.Lock()


def forget_recordings() -> None:
    with _CACHE_LOCK:
        _CACHE.clear()
