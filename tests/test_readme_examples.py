"""The README's Python examples run as written.

Each ```python block is executed in a fresh interpreter (the real package, real
compilers, real runs). The only edits are placeholders a reader replaces too: a run
directory that exists, and scratch paths under the test's temporary folder. The
blocks that run the crew take minutes, so the test is marked slow.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

README = Path(__file__).resolve().parent.parent / "README.md"
BLOCK = re.compile(r"^```python\n(.*?)^```", re.MULTILINE | re.DOTALL)


def blocks() -> list[tuple[int, str]]:
    text = README.read_text()
    return [(text[:m.start()].count("\n") + 1, m.group(1)) for m in BLOCK.finditer(text)]


def test_the_readme_has_examples() -> None:
    found = blocks()
    assert len(found) >= 4
    for line, code in found:
        compile(code, f"README.md:{line}", "exec")  # every block is valid Python


def _run(code: str, cwd: Path, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], cwd=cwd, capture_output=True, text=True,
                          timeout=timeout, check=False, env={**os.environ, "PYTHONPATH": str(cwd)})


@pytest.mark.slow
def test_every_readme_example_runs(tmp_path: Path) -> None:
    stream_dir = tmp_path / "kc-stream"
    # examples that read a run back go after the ones that make runs
    for line, code in sorted(blocks(), key=lambda b: "/path/to/run" in b[1]):
        code = code.replace("/tmp/kc-stream", str(stream_dir))
        if "/path/to/run" in code:  # read back the run the streaming example made
            assert (stream_dir / "trace.jsonl").exists(), "the streaming example runs first"
            code = code.replace("/path/to/run", str(stream_dir))
        first = code.lstrip().splitlines()[0]
        if first.startswith("# ") and first.endswith(".py"):  # a module the reader saves
            name = first[2:].strip()
            (tmp_path / name).write_text(code)
            code = f"import {name[:-3]}\n"
        proc = _run(code, tmp_path)
        assert proc.returncode == 0, f"README.md:{line} failed:\n{proc.stderr[-3000:]}"
