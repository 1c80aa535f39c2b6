"""The adversarial suite: every attack is judged through the real CLI, in a subprocess.

Each kernel under `kernels/` names its attack in its header comment. Most run against
`ops/tiny_sss` (the library's scale_shift_sum with small sizes, given as a folder
path), so a check takes about a second; a few target library operators.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Self

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


# -- the worker processes of a run, seen from outside ----------------------------------
WORKER_MODULE = b"kernelcrew.tools.judge.worker"


def processes_naming(scratch: Path) -> dict[int, list[str]]:
    """Every process whose command line runs a worker on a job file under `scratch`: the
    worker, and the sandbox around it (unshare, bubblewrap, the launcher name the job
    file in theirs). pid -> argv."""
    root = str(scratch.resolve())
    out = {}
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            argv = [a.decode(errors="replace")
                    for a in (d / "cmdline").read_bytes().split(b"\0") if a]
        except OSError:
            continue
        if WORKER_MODULE.decode() in argv and any(
                a.startswith(root) and a.endswith("job.json") for a in argv):
            out[int(d.name)] = argv
    return out


@dataclass
class Seen:
    """One process naming a job file, as the watcher saw it."""

    job: str
    worker: bool  # the worker itself (else a sandbox around it)
    first: float  # time.monotonic() of the first and the last scan that saw it
    last: float


class WorkerWatch:
    """Scans /proc every few milliseconds while a run goes on, for the worker processes
    of job files under `scratch`: when each was first and last seen."""

    def __init__(self, scratch: Path, every_s: float = 0.01) -> None:
        scratch.mkdir(parents=True, exist_ok=True)
        self.scratch, self.every_s = scratch, every_s
        self.seen: dict[int, Seen] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._scan, daemon=True)

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _scan(self) -> None:
        while not self._stop.is_set():
            now = time.monotonic()
            for pid, argv in processes_naming(self.scratch).items():
                worker = argv[1:3] == ["-m", WORKER_MODULE.decode()]
                job = argv[3] if worker else next(a for a in argv if a.endswith("job.json"))
                s = self.seen.setdefault(pid, Seen(job, worker, now, now))
                s.last = now
                s.worker |= worker  # the launcher becomes the worker by exec: same pid
            self._stop.wait(self.every_s)

    def named(self, run_dir: str) -> list[Seen]:
        """The processes seen for the harness's run directory `run_dir` (run1: the duel's
        first kernel, the candidate; run2: the other)."""
        return [s for s in self.seen.values() if Path(s.job).parent.name == run_dir]

    def worker(self, run_dir: str) -> Seen:
        """The worker process of `run_dir` (see `named`)."""
        hits = [s for s in self.named(run_dir) if s.worker]
        assert len(hits) == 1, (run_dir, self.seen)
        return hits[0]


def assert_none_left(scratch: Path, within_s: float = 3.0) -> None:
    """No process naming a job file under `scratch` is alive `within_s` from now (the ones
    found are killed, so a failing test leaves nothing behind either)."""
    deadline = time.monotonic() + within_s
    while (left := processes_naming(scratch)) and time.monotonic() < deadline:
        time.sleep(0.05)
    for pid in left:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    assert not left, f"processes left behind: {left}"
