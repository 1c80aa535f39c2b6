"""The parent's side of one worker: start it, know who it is, drive it call by call.

A session starts a sandboxed worker (see `worker`), identifies its process from the
process tree before the kernel is loaded (`procs.find_worker`), measures what a call of
nothing costs (the calibration: `null` commands, before the kernel is loaded, so the
kernel cannot touch it), then runs every command the same way:

    the worker is stopped -> the parent's clock starts -> the parent continues it and
    sends the command -> the worker replies and stops itself -> the parent confirms that
    every thread is stopped -> the clock stops

so a call's time is the parent's own measurement of everything the process did while
it could run, less the calibrated cost of a call of nothing (`overhead_ms`, the least of
the calibration calls: what is subtracted is never more than a call's true overhead).
Whatever the kernel's threads do after the reply is inside the window until they are
stopped, and between two commands none of them runs.

Profiler re-runs (a tool such as perf or ncu starts the worker as its child) are not
frozen: they judge nothing.
"""

from __future__ import annotations

import ctypes
import json
import os
import select
import signal
import threading
import time
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from kernelcrew.tools.judge.procs import STOP_GRACE_S, ProcessError, WorkerProcess, find_worker
from kernelcrew.tools.judge.records import HarnessView
from kernelcrew.tools.judge.shm import SharedBuffer
from kernelcrew.tools.sandbox import SandboxRun

CALIBRATION_CALLS = 24  # `null` commands before the kernel is loaded
REPLY_MAX_BYTES = 1 << 12  # a reply longer than this is not one of the worker's


_PR_SET_TIMERSLACK = 29
PARENT_RT_PRIORITY = 2  # above the worker's (procs.WORKER_RT_PRIORITY)
# A call still running after this long goes on at normal priority: a kernel that hangs
# (or runs for long) must not hold the machine's CPUs real-time until its timeout
RT_GRACE_S = 1.0


@contextmanager
def _prompt():
    """The parent thread, for one command: woken as soon as the worker replies. A real-time
    priority where the system grants one (root, or an rtprio limit; otherwise the thread
    stays as it was) so a busy machine does not keep the parent off a CPU after the reply
    (on the loaded 2-core VM that added milliseconds to the window). The worker's threads
    run real-time too, one step under it (`Session.start`): on the same VM, loaded with
    other work at 5 to 8 runnable tasks, an A/A check's measured noise was ±51-75% with
    neither, ±21-37% with the worker at nice -20 and ±16-23% real-time. The parent is not
    pinned to the worker's CPU: a real-time parent polling for the worker's stop on the
    CPU the worker needs to get there held it off for tens of milliseconds a call."""
    policy = None
    try:
        policy = (os.sched_getscheduler(0), os.sched_getparam(0))
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(PARENT_RT_PRIORITY))
    except (AttributeError, OSError):
        policy = None
    try:
        yield
    finally:
        if policy is not None:
            try:
                os.sched_setscheduler(0, policy[0], policy[1])
            except OSError:
                pass


def _set_timer_slack() -> None:
    try:
        ctypes.CDLL(None).prctl(_PR_SET_TIMERSLACK, 1000, 0, 0, 0)
    except (OSError, AttributeError):
        pass


class SessionFailed(Exception):
    """The worker failed (`why` says how; "" when its exit says it) or broke the
    protocol; `integrity` when the failure is the judge's own check of the worker."""

    def __init__(self, why: str, *, integrity: bool = False) -> None:
        super().__init__(why)
        self.why, self.integrity = why, integrity


@dataclass
class Reply:
    words: list[str]
    ms: float  # the parent's window around the command, less nothing


class Session:
    """One worker process and the parent's control of it (see the module text)."""

    def __init__(self, h: HarnessView, job: dict, out_dir: Path, outputs: SharedBuffer, *,
                 wall_s: float, wrap: tuple[str, ...] = (), freeze: bool = True,
                 name: str = "worker") -> None:
        self.h, self.out_dir, self.outputs, self.name = h, out_dir, outputs, name
        self.freeze = freeze
        self.cmd_path, self.reply_path = out_dir / "cmd.fifo", out_dir / "reply.fifo"
        os.mkfifo(self.cmd_path, 0o600)
        os.mkfifo(self.reply_path, 0o600)
        self.job = {**job, "fifo_cmd": str(self.cmd_path), "fifo_reply": str(self.reply_path),
                    "freeze": freeze}
        (out_dir / "job.json").write_text(json.dumps(self.job))
        # O_RDWR: neither open blocks, and the parent never reads EOF from its own pipe
        self.tx = os.open(self.cmd_path, os.O_RDWR)
        self.rx = os.open(self.reply_path, os.O_RDWR | os.O_NONBLOCK)
        self.buf = b""
        self.root: int | None = None  # the sandbox's first process (the parent's child)
        self.proc: WorkerProcess | None = None
        self.run: SandboxRun | None = None
        self.overhead_ms = 0.0  # a call of nothing, warm
        self.cold_overhead_ms = 0.0  # ... and after the parent's cache flush
        self.jitter_ms = 0.0  # a call of nothing's median over its least
        self.calibration_ms: list[float] = []
        self.killed_after: float | None = None
        self.realtime = False  # the worker's threads run real-time (see _prompt)
        self.stopped_why = ""  # why the parent killed it when it was done with it
        self._started = threading.Event()
        # the launcher's word that the worker has stopped (see confine._reap): read end
        # here, write end to the sandbox; `notified` says whether it will come
        self.stops_r, self._stops_w = os.pipe()
        os.set_blocking(self.stops_r, False)
        self.notified = False
        fds = [outputs.fd, *sorted({c["inputs"]["fd"] for c in job["cases"]})]
        self.thread = threading.Thread(target=self._main, args=(wall_s, wrap, fds), daemon=True)

    # -- process --------------------------------------------------------------------
    def _main(self, wall_s: float, wrap: tuple[str, ...], fds: list[int]) -> None:
        def started(pid: int) -> None:
            self.root = pid
            self._started.set()

        def ready(yes: bool) -> None:
            self.notified = yes and self.freeze

        try:
            self.run = self.h.confined(self.job, self.out_dir, wrap, timeout_s=wall_s,
                                       pass_fds=fds, on_start=started, notify=self._stops_w,
                                       notify_ready=ready)
        finally:
            self._started.set()

    def start(self, timeout_s: float) -> None:
        """Start the worker and take its identity (before the kernel is loaded)."""
        _set_timer_slack()
        self.thread.start()
        self.expect("hello", timeout_s=timeout_s)
        os.close(self._stops_w)  # the sandbox has its copy: EOF here when it ends
        if not self.freeze:
            return
        if self.root is None:
            raise SessionFailed("the worker's sandbox did not start", integrity=True)
        try:
            self.proc = WorkerProcess(find_worker(self.root, self.h.python))
        except ProcessError as e:
            raise SessionFailed(f"the worker process could not be identified: {e}",
                                integrity=True) from None
        self._confirm_stopped()
        self.realtime = self.proc.set_realtime(True)
        if self.realtime and self.notified:
            self.proc.set_realtime(True, pid=self.proc.parent)  # the launcher: prompt word

    def calibrate(self, timeout_s: float, flush: Callable[[], None],
                  n: int = CALIBRATION_CALLS) -> None:
        """What a call of nothing costs the parent's clock: the least of n, with warm
        caches and after the parent's cache flush (a cold case's calls find the
        interpreter's own code and data evicted too: on a 2-core VM the steps around a
        call took about 0.35 ms more than warm)."""
        self.calibration_ms = [self.command("null", expect="done", timeout_s=timeout_s).ms
                               for _ in range(n)]
        self.overhead_ms = min(self.calibration_ms) if self.calibration_ms else 0.0
        if self.calibration_ms:
            ordered = sorted(self.calibration_ms)
            self.jitter_ms = ordered[len(ordered) // 2] - self.overhead_ms
        cold = []
        for _ in range(max(1, n // 2)):
            flush()
            cold.append(self.command("null", expect="done", timeout_s=timeout_s).ms)
        self.cold_overhead_ms = min(cold)

    def place(self, cpu: int | None, cpus: list[int]) -> int:
        if self.proc is None or cpu is None or not cpus:
            return 0
        return self.proc.place(cpu, cpus)

    # -- commands -------------------------------------------------------------------
    def command(self, *words: object, expect: str, timeout_s: float, stop: bool = True,
                exact: bool = True) -> Reply:
        """Send one command with the worker stopped before and after (`stop=False`: the
        last one, after which it exits); the parent's window around it (see the module
        text). The reply must be the word `expect` alone (`exact=False`: followed by
        data, as a device worker's timings)."""
        with _prompt():
            t0 = time.perf_counter_ns()
            if self.proc is not None:
                self.proc.resume()
            self.send(*words)
            got = self._line(timeout_s).split()
            if not got or got[0] != expect or (exact and len(got) != 1):
                raise SessionFailed(f"kernel broke the worker's handshake with the parent "
                                    f"(expected {expect!r}, got {' '.join(got)[:40]!r})")
            t1 = self._confirm_stopped() if stop else time.perf_counter_ns()
        return Reply(got, (t1 - t0) / 1e6)

    def _confirm_stopped(self) -> int:
        """Wait until every thread of the worker is stopped; the time it was seen so."""
        if self.proc is None:
            return time.perf_counter_ns()
        if self.notified:
            return self._stop_notice()
        try:
            ok = self.proc.wait_stopped()
        except ProcessError as e:
            raise SessionFailed(str(e), integrity=True) from None
        if not ok:
            raise SessionFailed("")  # it ended: its exit says why
        return time.perf_counter_ns()

    def _stop_notice(self) -> int:
        """Wait for the launcher's word that the worker stopped (no polling); the time it
        came. The word is the kernel's report of a whole group stop, so every thread must
        be stopped then: a worker seen running after it forged the word."""
        deadline = time.monotonic() + STOP_GRACE_S
        while time.monotonic() < deadline:
            if select.select([self.stops_r], [], [], 0.05)[0]:
                try:
                    got = os.read(self.stops_r, 64)
                except BlockingIOError:
                    continue
                t = time.perf_counter_ns()
                if not got:
                    raise SessionFailed("")  # the sandbox ended: its exit says why
                if not self.proc.stopped():
                    if self.proc.alive():
                        raise SessionFailed("the worker was running when its stop was "
                                            "reported (a forged report)", integrity=True)
                    raise SessionFailed("")
                return t
        self.proc.signal(signal.SIGSTOP)
        raise SessionFailed(f"the worker did not stop itself within {STOP_GRACE_S:.0f} s of "
                            "its reply (its kernel kept it running)", integrity=True)

    def send(self, *words: object) -> None:
        os.write(self.tx, (" ".join(map(str, words)) + "\n").encode())

    def expect(self, *words: str, timeout_s: float) -> None:
        line = self._line(timeout_s)
        if line.split() != list(words):
            raise SessionFailed("kernel broke the worker's handshake with the parent "
                                f"(expected {' '.join(words)!r}, got {line[:40]!r})")

    def _line(self, timeout_s: float) -> str:
        t0 = time.monotonic()
        demoted = False
        while b"\n" not in self.buf:
            if self.realtime and not demoted and time.monotonic() - t0 > RT_GRACE_S and \
                    self.proc is not None:
                self.proc.set_realtime(False)  # see RT_GRACE_S
                demoted = True
            if not self.thread.is_alive() and not self._readable(0):
                raise SessionFailed("")  # the worker ended: its exit says why
            if time.monotonic() - t0 > timeout_s:
                self.kill()
                self.killed_after = time.monotonic() - t0
                raise SessionFailed(f"kernel timed out after {self.killed_after:.1f} s "
                                    "(killed)")
            if self._readable(0.05):
                try:
                    chunk = os.read(self.rx, 4096)
                except BlockingIOError:
                    continue
                self.buf += chunk
                if len(self.buf) > REPLY_MAX_BYTES:
                    raise SessionFailed("kernel flooded the worker's handshake with the parent")
        if demoted and self.proc is not None:
            self.proc.set_realtime(True)
        line, _, self.buf = self.buf.partition(b"\n")
        return line.decode(errors="replace")

    def _readable(self, timeout: float) -> bool:
        return bool(select.select([self.rx], [], [], timeout)[0])

    # -- the end --------------------------------------------------------------------
    def kill(self) -> None:
        """Kill the worker's whole sandbox (the process group the parent started)."""
        if self.root is not None:
            try:
                os.killpg(self.root, 9)
            except (ProcessLookupError, PermissionError):
                pass

    def close_pipes(self) -> None:
        for fd in (self.tx, self.rx):
            try:
                os.close(fd)
            except OSError:
                pass
        if self.proc is not None:
            self.proc.resume()  # a stopped worker cannot read the end of its pipe

    def release(self) -> None:
        if self.proc is not None:
            self.proc.close()
        for fd in (self.stops_r, self._stops_w):
            try:
                os.close(fd)
            except OSError:
                pass
