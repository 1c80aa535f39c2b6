"""docs/moves.md's examples run as written: a CPU move and a CUDA move defined there,
registered with `register_transform` and applied to library ops, and the views of a
library kernel. Each block runs in a fresh interpreter, so its registrations do not reach
the other tests."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "moves.md"
BLOCK = re.compile(r"^```python\n(.*?)^```", re.MULTILINE | re.DOTALL)


def blocks() -> list[tuple[int, str]]:
    text = DOC.read_text()
    return [(text[:m.start()].count("\n") + 1, m.group(1)) for m in BLOCK.finditer(text)]


def test_the_page_has_a_cpu_move_a_cuda_move_and_a_view() -> None:
    found = [code for _, code in blocks()]
    assert len(found) == 3
    assert "register_transform(" in found[0] and '("cpu",)' in found[0]
    assert "register_transform(" in found[1] and '("cuda",)' in found[1]
    assert "VIEWS" in found[2]


@pytest.mark.parametrize(("line", "code"), blocks(), ids=lambda v: str(v)[:20])
def test_every_example_runs(line: int, code: str, tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True,
                          text=True, timeout=300, check=False,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 0, f"docs/moves.md:{line} failed:\n{proc.stderr[-3000:]}"
    if "ivdep" in code:  # the move went on the inner loop of the library's baseline
        assert "#pragma GCC ivdep" in proc.stdout
