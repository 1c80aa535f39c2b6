"""The run directory and its trace: one JSON line per node execution."""

from __future__ import annotations

import json
import os
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import platformdirs

_LOCK = threading.Lock()


def runs_root() -> Path:
    """Where runs are kept: $KERNELCREW_RUNS_DIR, else the user's data folder."""
    return Path(os.environ.get("KERNELCREW_RUNS_DIR") or
                Path(platformdirs.user_data_dir("kernelcrew")) / "runs")


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def append_event(run_dir: str | Path, event: dict[str, Any]) -> None:
    """Append one event; a single write with O_APPEND so parallel nodes never interleave."""
    line = (json.dumps(event, default=str) + "\n").encode()
    path = Path(run_dir) / "trace.jsonl"
    with _LOCK:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            os.write(fd, line)
        finally:
            os.close(fd)


def emit(run_dir: str | Path, node: str, summary: str, *, t0: float, iteration: int = 0,
         agent: str | None = None, refs: dict[str, str] | None = None,
         tokens: dict[str, int] | None = None, **extra: Any) -> None:
    """Record a finished node execution."""
    append_event(run_dir, {
        "time": now_iso(), "duration_s": round(time.monotonic() - t0, 3),
        "iteration": iteration, "node": node, "agent": agent, "summary": summary[:300],
        "refs": refs or {}, "tokens": tokens or {}, **extra,
    })


def read_trace(run_dir: str | Path) -> list[dict[str, Any]]:
    path = Path(run_dir) / "trace.jsonl"
    if not path.exists():
        return []
    out = []
    for line in path.read_text().splitlines():
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError:
            continue  # a line cut by a kill
    return out


def write_json_atomic(path: str | Path, obj: Any) -> None:
    """Write via a temporary file and rename, so a kill never leaves half a file."""
    path = Path(path)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(obj, indent=2, default=str))
    os.replace(tmp, path)


def write_text_atomic(path: str | Path, text: str) -> None:
    path = Path(path)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)
