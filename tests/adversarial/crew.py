"""The crew's race path, driven with a scripted LLM: the model offers an attack kernel as
its candidate, and the real crew (the CLI in a subprocess: graph, compiler, workers,
judge) evaluates it. Only the model is scripted, through the local OpenAI-compatible
test server (tests/llm/scripted_server.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from tests.llm.scripted_server import Exchange, Reply, ScriptedServer, answer, error
from tests.llm.scripts import PLAN

ROOT = Path(__file__).resolve().parent.parent.parent
API_KEY = "sk-kernelcrew-TEST-4f9a"


@dataclass
class CrewRun:
    """What one crew run made of the offered kernel."""

    rc: int
    result: dict | None  # the --json document
    evals: dict[str, dict]  # the run's recorded evaluations (evals/*.json), by key
    trace: list[dict]
    stdout: str
    stderr: str
    seconds: float
    offered: int  # how many times the model was asked for code (and gave the kernel)

    @property
    def accepted(self) -> list[dict]:
        return (self.result or {}).get("accepted", [])

    def details(self) -> str:
        """Every evaluation's recorded verdict and reason, and the compile errors, as one
        text: what the crew recorded about the candidate."""
        parts = []
        for key, e in sorted(self.evals.items()):
            parts.append(f"{key}: verdict={e.get('verdict')} correct={e.get('correct')} "
                         f"failure={e.get('failure', '')} reason={e.get('reason', '')}")
        for ev in self.trace:
            if ev.get("node") == "execute" and ev.get("ok") is False:
                parts.append(f"compile: {ev.get('summary', '')}")
        return "\n".join(parts)

    def context(self) -> str:
        return (f"rc={self.rc} offered={self.offered}\n{self.details()}\n"
                f"stderr:\n{self.stderr[-2000:]}")


def _scripted(kernel: str):
    """Replies for the memory_access specialist: the plan, then the kernel every time it
    is asked for code (after a compile error or a wrong result too), and an explanation
    when one is asked for."""

    def reply(ex: Exchange) -> Reply:
        if ex.step == "plan":
            return answer(PLAN)
        if ex.step == "code":
            return answer({"kernel": kernel, "expected_gain": 3.0, "risks": "none",
                           "confidence": 0.9})
        if ex.step == "explain":
            return answer({"cause": "rounding in the accumulation", "fix": "none needed"})
        return error(418, f"no scripted reply for step {ex.step}")

    return reply


def crew_offers(kernel: Path | str, op: Path | str, *, reps: int = 4, timeout_s: int = 30,
                env: dict[str, str] | None = None, extra: tuple[str, ...] = (),
                limit_s: float = 900) -> CrewRun:
    """Run `kernelcrew optimize OP --agents llm` for one iteration, the scripted model
    offering `kernel` (a file's text) as its candidate; what the crew made of it."""
    text = Path(kernel).read_text() if isinstance(kernel, Path) else kernel
    srv = ScriptedServer(default=_scripted(text))
    srv.start()
    try:
        cmd = [sys.executable, "-m", "kernelcrew.cli", "optimize", str(op), "--agents", "llm",
               "--base-url", srv.base_url, "--max-iters", "1", "--reps", str(reps),
               "--timeout", str(timeout_s), "--no-memory", "--json",
               "--specialists", "memory_access", "--llm-timeout", "60", *extra]
        full_env = {**os.environ, "OPENAI_API_KEY": API_KEY, "KERNELCREW_LLM_MODEL": "scripted",
                    "KERNELCREW_LLM_BACKOFF": "0.01", **(env or {})}
        full_env.pop("OPENAI_BASE_URL", None)
        t0 = time.monotonic()
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=limit_s, cwd=ROOT,
                           env=full_env, check=False)
        seconds = time.monotonic() - t0
    finally:
        srv.stop()
    try:
        result = json.loads(p.stdout)
    except json.JSONDecodeError:
        result = None
    evals, trace = {}, []
    if result and result.get("run_dir"):
        run = Path(result["run_dir"])
        for f in sorted((run / "evals").glob("*.json")) if (run / "evals").is_dir() else []:
            try:
                evals[f.stem] = json.loads(f.read_text())
            except json.JSONDecodeError:
                continue
        if (run / "trace.jsonl").exists():
            for line in (run / "trace.jsonl").read_text().splitlines():
                try:
                    trace.append(json.loads(line))
                except json.JSONDecodeError:
                    continue
    offered = len(srv.calls(step="code"))
    return CrewRun(p.returncode, result, evals, trace, p.stdout, p.stderr, seconds, offered)
