"""The Python examples of the README and of the guide (docs/*.md) run as written.

Each ```python block is executed in a fresh interpreter (the real package, real
compilers, real runs). The only edits are placeholders a reader replaces too: a run
directory that exists, and scratch paths under the test's temporary folder. A block whose
first line is `# name.py` is saved as that module and imported, so the blocks after it on
the same page can import it. Blocks that run the crew take minutes: those run in the slow
test, the others each in a test of their own. docs/moves.md has its own test
(tests/agents/test_moves_doc.py).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
DOCS = ROOT / "docs"
BLOCK = re.compile(r"^```python\n(.*?)^```", re.MULTILINE | re.DOTALL)
TESTED_ELSEWHERE = {"moves.md"}  # tests/agents/test_moves_doc.py
# a block that runs the crew (or reads back a run the crew made) takes minutes
CREW = re.compile(r"build_graph|graph\.(invoke|stream)|/path/to/run|runner\.optimize")


def pages() -> list[Path]:
    return [README, *sorted(p for p in DOCS.glob("*.md") if p.name not in TESTED_ELSEWHERE)]


def blocks(page: Path = README) -> list[tuple[int, str]]:
    text = page.read_text()
    return [(text[:m.start()].count("\n") + 1, m.group(1)) for m in BLOCK.finditer(text)]


def _where(page: Path, line: int) -> str:
    return f"{page.relative_to(ROOT)}:{line}"


def test_the_readme_and_the_guide_have_examples() -> None:
    assert blocks(README), "the README shows the API"
    found = [(p, line, code) for p in pages() for line, code in blocks(p)]
    assert len(found) >= 8
    for page, line, code in found:
        compile(code, _where(page, line), "exec")  # every block is valid Python
    named = {p.name for p, _, _ in found}
    # the worked examples docs/index.md points to (moves.md: its own test)
    assert {"backends.md", "peers.md", "crew.md", "runs.md"} <= named, named


def _run(code: str, cwd: Path, timeout: float = 600) -> subprocess.CompletedProcess:
    path = os.pathsep.join([str(cwd), str(ROOT)])  # the reader's folder, then the package
    return subprocess.run([sys.executable, "-c", code], cwd=cwd, capture_output=True, text=True,
                          timeout=timeout, check=False, env={**os.environ, "PYTHONPATH": path})


def _run_block(page: Path, line: int, code: str, folder: Path) -> subprocess.CompletedProcess:
    first = code.lstrip().splitlines()[0]
    if first.startswith("# ") and first.endswith(".py"):  # a module the reader saves
        name = first[2:].strip()
        (folder / name).write_text(code)
        code = f"import {name[:-3]}\n"
    proc = _run(code, folder)
    assert proc.returncode == 0, f"{_where(page, line)} failed:\n{proc.stderr[-3000:]}"
    return proc


def _quick_pages() -> list[Path]:
    return [p for p in pages() if any(not CREW.search(c) for _, c in blocks(p))]


@pytest.mark.parametrize("page", _quick_pages(), ids=lambda p: p.name)
def test_every_quick_example_runs(page: Path, tmp_path: Path) -> None:
    """The blocks that do not run the crew, page by page, in order, in one folder."""
    for line, code in blocks(page):
        if not CREW.search(code):
            _run_block(page, line, code, tmp_path)


@pytest.mark.slow
def test_every_crew_example_runs(tmp_path: Path) -> None:
    stream_dir = tmp_path / "kc-stream"
    found = [(p, line, code) for p in pages() for line, code in blocks(p) if CREW.search(code)]
    assert found
    # examples that read a run back go after the ones that make runs
    for page, line, code in sorted(found, key=lambda b: "/path/to/run" in b[2]):
        code = code.replace("/tmp/kc-stream", str(stream_dir))
        if "/path/to/run" in code:  # read back the run the streaming example made
            assert (stream_dir / "trace.jsonl").exists(), "the streaming example runs first"
            code = code.replace("/path/to/run", str(stream_dir))
        _run_block(page, line, code, tmp_path)
