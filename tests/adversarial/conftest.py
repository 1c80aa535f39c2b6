"""The adversarial suite: every attack is judged through the real CLI, in a subprocess.

Each kernel under `kernels/` names its attack in its header comment. Most run against
`ops/tiny_sss` (the library's scale_shift_sum with small sizes, given as a folder
path), so a check takes about a second; a few target library operators.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest

from kernelcrew.tools.sandbox import SANDBOX_ENV, available_confinements

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
KERNELS = HERE / "kernels"
TINY = HERE / "ops" / "tiny_sss"
MARKER = "kernelcrew_adv_marker"  # the file name the writing attacks try to create
# the evasive kernels use x86-64 / aarch64 system call numbers
EVASIVE_ARCH = os.uname().machine in ("x86_64", "aarch64")


def _passwd_lines() -> list[str]:
    try:
        text = Path("/etc/passwd").read_text()
    except OSError:
        return []
    return [ln.strip() for ln in text.splitlines() if len(ln.strip()) >= 8]


PASSWD_LINES = _passwd_lines()


@dataclass
class Judged:
    """What `kernelcrew check --json` said about one kernel."""

    rc: int
    doc: dict | None  # the JSON document, None if stdout was not one
    stdout: str
    stderr: str
    seconds: float

    @property
    def verdict(self) -> str | None:
        return self.doc.get("verdict") if self.doc else None

    @property
    def reason(self) -> str:
        return self.doc.get("reason", "") if self.doc else ""

    def leaked_host_lines(self) -> list[str]:
        """Lines of /etc/passwd that appear anywhere in what kernelcrew printed."""
        out = self.stdout + self.stderr
        return [ln for ln in PASSWD_LINES if ln in out]


def judge(kernel: str | Path, op: str | Path = TINY, *, timeout: float = 10, reps: int = 4,
          env: dict[str, str] | None = None, limit_s: float = 240) -> Judged:
    """Run `kernelcrew check OP KERNEL --json` and parse what it printed."""
    kernel = KERNELS / kernel if isinstance(kernel, str) else kernel
    cmd = [sys.executable, "-m", "kernelcrew.cli", "check", str(op), str(kernel), "--json",
           "--reps", str(reps), "--timeout", str(timeout)]
    t0 = time.monotonic()
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=limit_s, cwd=ROOT,
                          env={**os.environ, **(env or {})}, check=False)
    seconds = time.monotonic() - t0
    try:
        doc = json.loads(proc.stdout)
    except json.JSONDecodeError:
        doc = None
    return Judged(proc.returncode, doc, proc.stdout, proc.stderr, seconds)


def assert_rejected(j: Judged, pattern: str) -> None:
    """Rejected (exit 1) with a reason matching `pattern`; kernelcrew itself intact."""
    context = f"rc={j.rc}\nstdout:\n{j.stdout[-3000:]}\nstderr:\n{j.stderr[-3000:]}"
    assert "Traceback" not in j.stderr, context
    assert j.doc is not None, f"--json printed no JSON document\n{context}"
    assert j.rc == 1, context
    assert j.verdict == "rejected", context
    assert j.doc["correct"] is False, context
    assert re.search(pattern, j.reason), f"reason {j.reason!r} does not match {pattern!r}"
    assert not j.leaked_host_lines(), f"host file content in the output: {j.leaked_host_lines()}"


def assert_judged_normally(j: Judged) -> None:
    """A correct kernel gets a timing verdict (exit 0), not a rejection."""
    context = (f"rc={j.rc} verdict={j.verdict} reason={j.reason!r}\n"
               f"stdout:\n{j.stdout[-3000:]}\nstderr:\n{j.stderr[-3000:]}")
    assert j.rc == 0, context
    assert j.doc is not None and j.doc["correct"] is True, context
    assert j.verdict in ("faster", "same", "slower"), context


def fresh_copy(src: Path, dst_dir: Path) -> Path:
    """A copy of a kernel file with a unique comment, so it is compiled, not cached."""
    text = src.read_text()
    out = dst_dir / f"{src.stem}_{uuid.uuid4().hex[:8]}{src.suffix}"
    out.write_text(text + f"\n// nonce {uuid.uuid4().hex}\n")
    return out


# Every test here runs once under each confinement that works on this machine
# (bubblewrap where installed; "stock", unshare + Landlock + seccomp, wherever the kernel
# allows): KERNELCREW_SANDBOX forces it in kernelcrew's processes. Where neither works,
# the tests run under "limits only" and the ones that need a confinement skip, saying so.
CONFINING = [k for k in available_confinements() if k != "limits"]
CONFINEMENT_NAMES = {"bwrap": "bubblewrap", "stock": "stock", "limits": "limits only"}


@pytest.fixture(params=CONFINING or ["limits"], autouse=True)
def confinement(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv(SANDBOX_ENV, request.param)
    return request.param


@pytest.fixture
def contained(confinement: str) -> str:
    """The confinement, for a test that needs files and network confined."""
    if confinement == "limits":
        pytest.skip("no confinement works on this machine (neither bubblewrap nor unshare/"
                    "Landlock): only resource limits apply")
    return confinement


@pytest.fixture(scope="session", autouse=True)
def _private_scratch(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Scratch of this session in its own folder (the suite checks it is left empty)."""
    scratch = tmp_path_factory.mktemp("adv-scratch")
    os.environ["KERNELCREW_SCRATCH"] = str(scratch)
    return scratch


def marker_places() -> list[Path]:
    """Where the writing attacks try to create MARKER (see write_outside_evasive.cpp)."""
    places = {Path("/tmp"), Path("/var/tmp"), Path("/root"), Path.home(), ROOT, ROOT.parent,
              HERE, KERNELS}
    for p in sys.path:
        if p and Path(p).is_dir():
            places |= {Path(p), Path(p).parent}
    scratch = os.environ.get("KERNELCREW_SCRATCH")
    if scratch:
        s = Path(scratch)
        places |= {s, s.parent, s.parent.parent}
    for shm in (Path("/dev/shm"), Path(f"/dev/shm/kernelcrew-{os.getuid()}")):
        if shm.is_dir():
            places.add(shm)
    return sorted(places)


@pytest.fixture(scope="session")
def marker_baseline() -> dict[Path, set[str]]:
    """Entries named like the marker in every place, before the suite ran."""
    return {p: _marked(p) for p in marker_places()}


def _marked(place: Path) -> set[str]:
    try:
        return {e.name for e in place.iterdir() if MARKER in e.name}
    except OSError:
        return set()


@pytest.fixture(scope="session", autouse=True)
def _marker_snapshot(marker_baseline: dict[Path, set[str]]) -> None:
    """Take the snapshot before any attack runs."""
