"""The worker process as the parent sees it: who it is, stopping it, placing its threads.

The worker's identity is taken from the process tree the parent started, before the
kernel is loaded: the sandbox's first process is the parent's child, and the worker is
the last process of the chain below it (the launcher, bubblewrap or a profiler may stand
in between). Its PID is held through a pidfd from then on, so a reused PID cannot stand
in for it. Nothing the kernel can write (its command line, its name, a report) decides
which process is the worker.

Between its calls the worker is stopped (SIGSTOP, which no code can catch, block or
ignore): the parent changes inputs, poisons outputs and copies results while no thread
of the kernel can run. The worker stops itself right after each reply (it is not the
first process of its PID namespace, see confine.py, so its own SIGSTOP is honoured); the
parent checks that every thread is stopped before it reads anything, and a worker that
does not stop is rejected.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

# Between two looks at the threads' states while waiting for a stop: short at first (the
# worker stops itself within microseconds of its reply), then longer. A real-time parent
# looking every 5 us for longer than that used up the CPU's real-time budget and was
# throttled for up to 50 ms, with a thread of the worker waiting behind it to stop.
STOP_POLL_S = (5e-6, 50e-6)
STOP_POLL_FAST = 20  # looks at the short interval
STOP_GRACE_S = 5.0  # a worker not stopped this long after its reply is not under control
# A worker's threads run real-time while it runs, where the system allows (see
# session._prompt): one step under the parent's, which must always get a CPU to end a
# window
WORKER_RT_PRIORITY = 1


class ProcessError(RuntimeError):
    """The worker cannot be identified or controlled: no verdict may rest on it."""


def _stat_fields(text: str) -> list[str]:
    """The fields of /proc/PID/stat after the command name (which may hold anything)."""
    return text[text.rfind(")") + 2:].split()


def cpu_ticks(pid: int | str = "self") -> int:
    """The CPU time a process has used, all its threads, in clock ticks (the unit of
    /proc/stat); read from the kernel's accounting, never from the process. 0 when gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = _stat_fields(f.read())
        return int(fields[11]) + int(fields[12])  # utime, stime (fields 14 and 15)
    except (OSError, ValueError, IndexError):
        return 0


def children_of(pid: int) -> list[int]:
    """The processes whose parent is `pid`."""
    out = []
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            out = [int(p) for p in f.read().split()]
        # other threads of `pid` may have children too
        for t in os.listdir(f"/proc/{pid}/task"):
            if t != str(pid):
                with open(f"/proc/{pid}/task/{t}/children") as f:
                    out += [int(p) for p in f.read().split()]
        return sorted(set(out))
    except OSError:
        pass
    for d in os.listdir("/proc"):  # no `children` file (CONFIG_PROC_CHILDREN off)
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as f:
                    if int(_stat_fields(f.read())[1]) == pid:
                        out.append(int(d))
            except (OSError, IndexError, ValueError):
                continue
    return sorted(out)


def descendants(pid: int) -> list[int]:
    out, todo = [], [pid]
    while todo:
        kids = children_of(todo.pop())
        out += kids
        todo += kids
    return out


def find_worker(root: int, exe: str) -> int:
    """The worker under the sandbox's first process `root`: the end of the chain of
    single children, which must run `exe` (the Python the harness started)."""
    want = os.path.realpath(exe)
    chain = [root]
    for _ in range(16):
        kids = children_of(chain[-1])
        if not kids:
            break
        if len(kids) > 1:
            raise ProcessError(f"the sandbox of the worker holds {len(kids)} processes under "
                               f"PID {chain[-1]}, expected one before the kernel is loaded")
        chain.append(kids[0])
    pid = chain[-1]
    try:
        got = os.path.realpath(f"/proc/{pid}/exe")
    except OSError as e:
        raise ProcessError(f"cannot read the worker's executable: {e}") from None
    if got != want:
        raise ProcessError(f"the last process of the worker's sandbox runs {got}, not {want}")
    return pid


class WorkerProcess:
    """A worker identified before its kernel was loaded (see the module text)."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        try:
            self.pidfd = os.pidfd_open(pid)
        except (OSError, AttributeError) as e:
            raise ProcessError(f"cannot hold the worker's PID {pid}: {e}") from None
        self._stat_fds: dict[int, int] = {}

    def close(self) -> None:
        for fd in self._stat_fds.values():
            os.close(fd)
        self._stat_fds.clear()
        try:
            os.close(self.pidfd)
        except OSError:
            pass

    def signal(self, sig: int) -> None:
        """Send `sig` to the worker through its pidfd (never to a reused PID)."""
        try:
            signal.pidfd_send_signal(self.pidfd, sig)
        except ProcessLookupError:
            pass  # it ended: its exit is the verdict

    def alive(self) -> bool:
        try:
            signal.pidfd_send_signal(self.pidfd, 0)
            return True
        except ProcessLookupError:
            return False

    def threads(self) -> list[int]:
        try:
            return sorted(int(t) for t in os.listdir(f"/proc/{self.pid}/task"))
        except (OSError, ValueError):
            return []

    def _states(self) -> list[str] | None:
        """Each thread's state letter; None when the process is gone."""
        out = []
        tids = self.threads()
        if not tids:
            return None
        for tid in tids:
            fd = self._stat_fds.get(tid)
            try:
                if fd is None:
                    fd = self._stat_fds[tid] = os.open(f"/proc/{self.pid}/task/{tid}/stat",
                                                       os.O_RDONLY)
                text = os.pread(fd, 1024, 0).decode(errors="replace")
            except OSError:
                continue  # a thread that just ended
            f = _stat_fields(text)
            if f:
                out.append(f[0])
        return out

    def stopped(self) -> bool:
        st = self._states()
        return st is not None and all(s in "Tt" for s in st)

    def wait_stopped(self) -> bool:
        """Wait until every thread is stopped: the worker stops itself after each reply
        (the parent may share its CPU, so it sleeps between looks to let it get there).
        False when the process is gone. A worker still running STOP_GRACE_S after its reply
        is stopped by the parent and ProcessError raised: an honest worker never keeps
        running, and the parent never sends SIGSTOP in the normal course, because a stop of
        its own could land before the worker's, which would then stop the worker again
        when it is next continued, waiting for nobody."""
        deadline = time.monotonic() + STOP_GRACE_S
        looks = 0
        while time.monotonic() < deadline:
            st = self._states()
            if st is None:
                return False
            if all(s in "Tt" for s in st):
                return True
            looks += 1
            time.sleep(STOP_POLL_S[looks > STOP_POLL_FAST])
        self.signal(signal.SIGSTOP)
        raise ProcessError(f"the worker did not stop itself within {STOP_GRACE_S:.0f} s of "
                           "its reply (its kernel kept it running)")

    def resume(self) -> None:
        self.signal(signal.SIGCONT)

    @property
    def parent(self) -> int:
        """The worker's parent process (the launcher, under the stock confinement)."""
        try:
            with open(f"/proc/{self.pid}/stat") as f:
                return int(_stat_fields(f.read())[1])
        except (OSError, IndexError, ValueError):
            return 0

    def set_realtime(self, on: bool, pid: int | None = None) -> bool:
        """Every thread of the worker (or of process `pid`) real-time (SCHED_FIFO,
        WORKER_RT_PRIORITY) or back to normal; the threads it starts later inherit it.
        False where the system refuses (no CAP_SYS_NICE: then timings share the CPUs with
        the machine's other work)."""
        ok = True
        if pid is not None and pid > 1:
            tids = [pid]
        else:
            tids = self.threads()
        for tid in tids:
            try:
                if on:
                    os.sched_setscheduler(tid, os.SCHED_FIFO,
                                          os.sched_param(WORKER_RT_PRIORITY))
                else:
                    os.sched_setscheduler(tid, os.SCHED_OTHER, os.sched_param(0))
            except (AttributeError, OSError):
                ok = False
        return ok

    def cpu_ns(self) -> int | None:
        """CPU time all of the worker's threads used so far (schedstat), ns."""
        total, seen = 0, False
        for tid in self.threads():
            try:
                total += int(Path(f"/proc/{self.pid}/task/{tid}/schedstat").read_text().split()[0])
                seen = True
            except (OSError, ValueError, IndexError):
                continue
        return total if seen else None

    def place(self, cpu: int, cpus: list[int]) -> int:
        """The worker's threads on one CPU each, from outside: the main thread on `cpu`,
        the others (an OpenMP team) on the next ones of `cpus` in turn. Returns how many
        threads there were.

        A single-threaded kernel left to the scheduler stays on whichever CPU it started
        on for the whole duel, and on a virtual machine one CPU can be slower than the
        other for minutes: both kernels are placed on the same CPU in a round, a
        different one from round to round. A team left to the scheduler shared one CPU
        with its main thread in about one run of four (a 3 ms run read 7 ms)."""
        tids = sorted(self.threads(), key=lambda t: (t != self.pid, t))
        first = cpus.index(cpu) if cpu in cpus else 0
        for i, tid in enumerate(tids):
            try:
                os.sched_setaffinity(tid, {cpus[(first + i) % len(cpus)]})
            except (AttributeError, OSError, ValueError):
                pass
        return len(tids)
