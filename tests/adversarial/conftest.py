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


def _resolver_missing() -> str:
    """Why the kernels that find `dlsym` in the C library cannot here, or "". They read a
    64-bit ELF symbol table, and the C library holds dlsym from glibc 2.34 on."""
    if not EVASIVE_ARCH:
        return "the resolver reads 64-bit ELF tables and syscall numbers of x86-64/aarch64"
    try:
        name, version = os.confstr("CS_GNU_LIBC_VERSION").split()
        major, minor = (int(v) for v in version.split(".")[:2])
    except (ValueError, OSError, AttributeError):
        return "not glibc: the resolver looks for dlsym in glibc's libc.so.6"
    if (major, minor) < (2, 34):
        return f"{name} {version}: dlsym lives in libdl before glibc 2.34, not in libc.so.6"
    return ""


RESOLVER_MISSING = _resolver_missing()
# the kernels that reach forbidden functions without importing them (through dlsym,
# found from the address of memcpy)
needs_resolver = pytest.mark.skipif(bool(RESOLVER_MISSING), reason=RESOLVER_MISSING or "-")


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
          env: dict[str, str] | None = None, limit_s: float = 240,
          min_speedup: float | None = None) -> Judged:
    """Run `kernelcrew check OP KERNEL --json` and parse what it printed."""
    kernel = KERNELS / kernel if isinstance(kernel, str) else kernel
    cmd = [sys.executable, "-m", "kernelcrew.cli", "check", str(op), str(kernel), "--json",
           "--reps", str(reps), "--timeout", str(timeout)]
    if min_speedup is not None:
        cmd += ["--min-speedup", str(min_speedup)]
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


# Honest math, whatever else a kernel does, times like the kernel it copies: its verdict
# against that kernel is noise. A `faster` verdict then needs the speedup beyond the band,
# here at least NO_GAIN_BAND (2x): what the attacks on timing would have won (3x and more
# for a slowed clock or a sabotaged baseline, a million for a forged time), and beyond
# what a copy reads on a loaded machine at the default 20 reps and 20 rounds (up to 1.3x:
# cases near the 20 us timing floor swing by a third). At the suite's 4 reps and 2 rounds
# a copy of the baseline read anywhere from 0.6x to 2.6x overall (single cases 0.03x to
# 180x) on a machine loaded 3-4x over its cores: too few runs for a median. The largest
# cases (the typical group) must read under 1.5x too.
NO_GAIN_BAND = 1.0
NO_GAIN = {"reps": 20, "min_speedup": NO_GAIN_BAND, "env": {"KERNELCREW_ROUNDS": "20"}}


def assert_no_gain(j: Judged) -> None:
    """Judged correct and not `faster` with the NO_GAIN_BAND, the typical group under 1.5x:
    whatever the kernel did beside its honest math bought it nothing."""
    context = (f"rc={j.rc} verdict={j.verdict} reason={j.reason!r}\n"
               f"stdout:\n{j.stdout[-3000:]}\nstderr:\n{j.stderr[-3000:]}")
    assert "Traceback" not in j.stderr, context
    assert j.doc is not None and j.doc["correct"] is True, context
    assert j.verdict in ("same", "slower"), context
    assert j.doc["group_speedups"].get("typical", 0.0) < 1.5, context
    assert not j.leaked_host_lines(), f"host file content in the output: {j.leaked_host_lines()}"


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
# A run's processes are found by where they work, not by what they call themselves (a
# kernel can rewrite its command line): every process of a worker's sandbox runs in the
# worker's scratch folder, SCRATCH/h-OP-ID/runN (the sandbox's first process is started
# there, the launcher and the worker inherit it). Within one run folder the worker is the
# end of the chain of processes below the sandbox's first one: the same rule the parent
# applies (kernelcrew/tools/judge/procs.py), read here from /proc on its own.


@dataclass(frozen=True)
class Proc:
    pid: int
    ppid: int
    run: str  # the run folder's name (run1: a duel's first kernel, the candidate; run2: ...)
    state: str  # the state letter of /proc/PID/stat
    cpu_s: float  # user + system CPU time so far


def _stat(pid: str) -> tuple[int, str, float] | None:
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    f = text[text.rfind(")") + 2:].split()
    tick = os.sysconf("SC_CLK_TCK")
    return int(f[1]), f[0], (int(f[11]) + int(f[12])) / tick


def processes_under(scratch: Path) -> dict[int, Proc]:
    """Every process working in a run folder under `scratch` (the sandbox around a
    worker and the worker itself): pid -> Proc."""
    root = str(scratch.resolve())
    out = {}
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            cwd = os.readlink(d / "cwd")
        except OSError:
            continue
        if not cwd.startswith(root + os.sep):
            continue
        st = _stat(d.name)
        if st is None:
            continue
        out[int(d.name)] = Proc(int(d.name), st[0], Path(cwd).name, st[1], st[2])
    return out


def workers_under(scratch: Path) -> dict[str, Proc]:
    """The worker of each run folder under `scratch`: run -> its Proc (the end of the chain
    below the sandbox's first process; a run whose chain forks is not listed)."""
    procs = processes_under(scratch)
    out = {}
    for run in {p.run for p in procs.values()}:
        mine = {pid: p for pid, p in procs.items() if p.run == run}
        roots = [p for p in mine.values() if p.ppid not in mine]
        if len(roots) != 1:
            continue
        cur = roots[0]
        while True:
            kids = [p for p in mine.values() if p.ppid == cur.pid]
            if len(kids) != 1:
                break
            cur = kids[0]
        out[run] = cur
    return out


@dataclass
class Seen:
    """One worker, as the watcher saw it."""

    pid: int
    first: float  # time.monotonic() of the first and the last scan that saw it
    last: float
    cpu_s: float = 0.0  # the CPU time it had used at the last scan
    states: str = ""  # its state letter at every scan, in order


class WorkerWatch:
    """Scans /proc every few milliseconds while a run goes on, for the workers of the runs
    under `scratch`: when each was first and last seen, its CPU time, its states."""

    def __init__(self, scratch: Path, every_s: float = 0.01) -> None:
        scratch.mkdir(parents=True, exist_ok=True)
        self.scratch, self.every_s = scratch, every_s
        self.seen: dict[str, Seen] = {}  # run folder name -> its worker
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
            for run, p in workers_under(self.scratch).items():
                s = self.seen.get(run)
                if s is None or s.pid != p.pid:  # the launcher's child: a new process
                    s = self.seen[run] = Seen(p.pid, now, now)
                s.last, s.cpu_s = now, p.cpu_s
                s.states += p.state
            self._stop.wait(self.every_s)

    def worker(self, run_dir: str) -> Seen:
        """The worker of the run folder `run_dir` (run1: the duel's first kernel, the
        candidate; run2: the other)."""
        assert run_dir in self.seen, (run_dir, self.seen)
        return self.seen[run_dir]


def assert_none_left(scratch: Path, within_s: float = 3.0) -> None:
    """No process works in a run folder under `scratch` `within_s` from now (the ones
    found are killed, so a failing test leaves nothing behind either)."""
    deadline = time.monotonic() + within_s
    while (left := processes_under(scratch)) and time.monotonic() < deadline:
        time.sleep(0.05)
    for pid in left:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    assert not left, f"processes left behind: {left}"
