"""Two kernels raced side by side: many short alternating rounds in one pair of workers.

Each kernel runs in its own sandboxed worker (`duel` mode), both alive at once; only one
of them runs at any moment. For every case, the parent asks each worker in turn for a
short batch of timed runs (who goes first alternates from round to round), so the two
kernels see the same machine within milliseconds of each other, many times over, and
the rounds give the gate an estimate of the spread of the speedup (see `gate`).

The parent starts and ends every batch itself, over a pipe (a FIFO in the worker's
scratch directory), and timestamps it with its own clock: the kernel runs in the worker
and can change anything the worker reports, but not the parent's clock. `crosscheck`
compares the times a worker reports with the parent's measurement of each batch, and a
kernel whose numbers disagree is rejected.

A worker that does not answer within the worker timeout is killed (found by its job
file in /proc) and judged `timed out`, as a plain run is. However the duel ends (a
kernel failed, the parent raised), no worker outlives it: the parent closes its pipes,
waits a little, kills the workers still alive and waits for their sandboxes (`_end`);
a worker that starts after the parent gave up finds no one at the other end of its
pipes and exits; and a worker dies with the parent process (see `sandbox`).
"""

from __future__ import annotations

import json
import os
import random
import select
import signal
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path

from kernelcrew.kernels.kernelfile import KernelFile
from kernelcrew.results import CompileResult
from kernelcrew.tools.judge.gate import median_ci_ranks
from kernelcrew.tools.judge.harness import Harness, KernelRun, case_key
from kernelcrew.tools.judge.worker import plan_checks
from kernelcrew.tools.sandbox import SandboxRun


@dataclass
class Batch:
    """One batch of timed runs of one kernel, as the parent saw it."""

    round: int
    start: int  # index of the first timed run of the batch within the case
    n: int
    outside_ms: float  # the parent's clock, from `time` sent to `done` received
    # CPU time the worker's threads used in that window, read by the parent from
    # /proc/PID/task/*/schedstat (None where it cannot be read): the main thread's, and
    # the most any one thread used
    cpu_main_ms: float | None = None
    cpu_max_ms: float | None = None
    # the main thread's wait on a run queue in that window (runnable, not running: the
    # second schedstat field), the part of its wall time a busy machine took from it
    wait_main_ms: float | None = None
    # each run of the batch is started and ended by the parent on its own (the next
    # run's preparation happens between two windows): per run, the parent's clock, the
    # main thread's CPU and the most CPU of any one thread, in ms (empty: one window)
    windows: list[tuple[float, float | None, float | None]] = field(default_factory=list)
    # per run: how long the parent waited for the other kernel's worker to go idle
    # before starting the window (ms), and the runs it was still busy when the wait
    # ran out (see `_settle`)
    settle_ms: list[float] = field(default_factory=list)
    unsettled: int = 0


@dataclass
class Duel:
    a: KernelRun
    b: KernelRun
    rounds: int
    batches: dict[str, dict[str, list[Batch]]] = field(default_factory=dict)  # "a"/"b" -> key
    busy: list[float] = field(default_factory=list)  # machine busy share per round, 0..1
    failed: str = ""  # "a" or "b": which kernel failed (its run says why)

    def round_samples(self, who: str) -> list[dict[str, list[float]]]:
        """Per round: case key -> the timed runs of that round's batch (ms)."""
        run = self.a if who == "a" else self.b
        out: list[dict[str, list[float]]] = [{} for _ in range(self.rounds)]
        for key, batches in self.batches.get(who, {}).items():
            times = run.samples.get(key, [])
            for bt in batches:
                out[bt.round][key] = times[bt.start: bt.start + bt.n]
        return out


def pooled(first: Duel, second: Duel) -> Duel:
    """Two duels of the same two kernels as one: the second's rounds follow the first's
    (both kernels' runs, batches and the machine's busy shares), its rows are the second's.
    Both must have finished with both kernels correct."""
    def runs(x: KernelRun, y: KernelRun) -> KernelRun:
        keys = set(x.samples) | set(y.samples)
        return replace(y, samples={k: x.samples.get(k, []) + y.samples.get(k, []) for k in keys})

    batches: dict[str, dict[str, list[Batch]]] = {}
    for who in ("a", "b"):
        run = first.a if who == "a" else first.b
        for key in set(first.batches.get(who, {})) | set(second.batches.get(who, {})):
            offset = len(run.samples.get(key, []))
            batches.setdefault(who, {})[key] = list(first.batches.get(who, {}).get(key, [])) + [
                replace(bt, round=bt.round + first.rounds, start=bt.start + offset)
                for bt in second.batches.get(who, {}).get(key, [])]
    return Duel(runs(first.a, second.a), runs(first.b, second.b), first.rounds + second.rounds,
                batches, first.busy + second.busy)


class _Fail(Exception):
    def __init__(self, who: str, why: str) -> None:
        super().__init__(why)
        self.who, self.why = who, why


class _Worker:
    def __init__(self, h: Harness, who: str, comp: CompileResult, kf: KernelFile, reps: int,
                 cache: dict[str, str], wall_s: float) -> None:
        self.who, self.kf, self.h = who, kf, h
        self.job, self.out_dir = h.job_dir(comp, kf, "duel", reps, cache=cache)
        self.cmd_path, self.reply_path = self.out_dir / "cmd.fifo", self.out_dir / "reply.fifo"
        os.mkfifo(self.cmd_path, 0o600)
        os.mkfifo(self.reply_path, 0o600)
        self.job["fifo_cmd"], self.job["fifo_reply"] = str(self.cmd_path), str(self.reply_path)
        (self.out_dir / "job.json").write_text(json.dumps(self.job))
        # O_RDWR: neither open blocks, and the parent never reads EOF from its own pipe
        self.tx = os.open(self.cmd_path, os.O_RDWR)
        self.rx = os.open(self.reply_path, os.O_RDWR | os.O_NONBLOCK)
        self.buf = b""
        self.run: SandboxRun | None = None
        self.pid: int | None = None
        self.killed_after: float | None = None
        self.stopped = ""  # why the parent killed it when the duel ended (see `_end`)
        self.thread = threading.Thread(target=self._main, args=(wall_s,), daemon=True)

    def start(self) -> None:
        self.thread.start()

    def _main(self, wall_s: float) -> None:
        self.run = self.h.confined(self.job, self.out_dir, timeout_s=wall_s)

    def send(self, *words: object) -> None:
        os.write(self.tx, (" ".join(map(str, words)) + "\n").encode())

    def expect(self, *words: str, timeout_s: float) -> None:
        line = self._line(timeout_s)
        if line.split() != list(words):
            raise _Fail(self.who, "kernel broke the worker's handshake with the parent "
                                  f"(expected {' '.join(words)!r}, got {line[:40]!r})")

    def _line(self, timeout_s: float) -> str:
        t0 = time.monotonic()
        while b"\n" not in self.buf:
            if not self.thread.is_alive() and not self._readable(0):
                raise _Fail(self.who, "")  # the worker ended: its exit says why
            if time.monotonic() - t0 > timeout_s:
                self.kill()
                self.killed_after = time.monotonic() - t0
                raise _Fail(self.who, f"kernel timed out after {self.killed_after:.1f} s "
                                      "(killed)")
            if self._readable(0.05):
                try:
                    chunk = os.read(self.rx, 4096)
                except BlockingIOError:
                    continue
                self.buf += chunk
                if len(self.buf) > 1 << 16:
                    raise _Fail(self.who, "kernel flooded the worker's handshake with the "
                                          "parent")
        line, _, self.buf = self.buf.partition(b"\n")
        return line.decode(errors="replace")

    def _readable(self, timeout: float) -> bool:
        return bool(select.select([self.rx], [], [], timeout)[0])

    def find_pid(self) -> None:
        """The worker's own process (not a sandbox wrapper around it), by its command line."""
        want = [b"-m", b"kernelcrew.tools.judge.worker", str(self.out_dir / "job.json").encode()]
        for d in Path("/proc").iterdir():
            if d.name.isdigit():
                try:
                    argv = (d / "cmdline").read_bytes().split(b"\0")
                except OSError:
                    continue
                if argv[1:4] == want:
                    self.pid = int(d.name)
                    return

    def cpu_ns(self) -> dict[int, tuple[int, int]] | None:
        """CPU time and run-queue wait so far of each of the worker's threads (ns), from
        schedstat."""
        if self.pid is None:
            return None
        out = {}
        try:
            for t in Path(f"/proc/{self.pid}/task").iterdir():
                try:
                    f = (t / "schedstat").read_text().split()
                    out[int(t.name)] = (int(f[0]), int(f[1]))
                except (OSError, ValueError, IndexError):
                    continue
        except OSError:
            return None
        return out or None

    def running(self) -> int | None:
        """How many of the worker's threads are on a CPU or waiting for one (state R), from
        /proc/PID/task/*/stat; None where it cannot be read."""
        if self.pid is None:
            return None
        n = 0
        try:
            for t in Path(f"/proc/{self.pid}/task").iterdir():
                try:
                    stat = (t / "stat").read_text()
                except OSError:
                    continue
                # the state follows the parenthesised command name, which may hold spaces
                if stat[stat.rfind(")") + 2: stat.rfind(")") + 3] == "R":
                    n += 1
        except OSError:
            return None
        return n

    def place(self, cpu: int, cpus: list[int]) -> int:
        """Before a run: the worker's threads get one CPU each, set by the parent from
        outside: the main thread `cpu` (the round's), the others (an OpenMP team) the
        next ones of `cpus` in turn. Returns how many threads the worker had (0: unknown).

        A single-threaded kernel left to the scheduler stays on whichever CPU it started
        on for the whole duel, and on a virtual machine one CPU can be slower than the
        other for minutes: both kernels are placed on the same CPU in a round, a
        different one from round to round. A team left to the scheduler shared one CPU
        with its main thread in about one run of four (a 3 ms run read 7 ms): the main
        thread wakes the team while the parent, which has just sent `time`, is still on
        the other CPU, and an idle CPU takes a queued thread only at its next balance,
        up to a tick later. A team made while the worker had one thread inherits that
        thread's CPU, so the threads are placed again after the warm-up that made the
        team (see `_timed_batch`)."""
        if self.pid is None:
            return 0
        try:
            # the main thread first, then by age
            tids = sorted((int(t.name) for t in Path(f"/proc/{self.pid}/task").iterdir()),
                          key=lambda t: (t != self.pid, t))
        except (OSError, ValueError):
            return 0
        first = cpus.index(cpu) if cpu in cpus else 0
        for i, tid in enumerate(tids):
            try:
                os.sched_setaffinity(tid, {cpus[(first + i) % len(cpus)]})
            except (AttributeError, OSError, ValueError):
                pass
        return len(tids)

    def kill(self) -> int:
        """Kill the worker and its sandbox (the processes whose command line names this
        job file); how many there were."""
        n = 0
        for pid in worker_pids(self.out_dir / "job.json"):
            try:
                os.kill(pid, signal.SIGKILL)
                n += 1
            except (ProcessLookupError, PermissionError):
                pass
        return n

    def close(self) -> None:
        for fd in (self.tx, self.rx):
            try:
                os.close(fd)
            except OSError:
                pass


def worker_pids(job: Path) -> list[int]:
    """The processes whose command line runs a worker on this job file: the worker, and
    the sandbox around it (unshare, bubblewrap, the launcher name it in theirs)."""
    want = str(job).encode()
    out = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            argv = (d / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if want in argv and b"kernelcrew.tools.judge.worker" in argv:
            out.append(int(d.name))
    return out


# After the last reply (`bye`) a worker exits at once; it gets the worker timeout to do
# so. When the duel ended early (a kernel failed, or the parent itself raised), a worker
# still waiting for a command reads the end of its pipe and exits; one busy in a call of
# its kernel is given END_GRACE_S. Then the survivors are killed (by job file) and the
# parent waits at most END_KILL_S for their sandboxes to end.
END_GRACE_S = 2.0
END_KILL_S = 15.0


def _end(ws: list[_Worker], grace_s: float, why: str) -> None:
    """Close the parent's pipes, wait up to grace_s for the workers to exit, and kill the
    ones that did not (`why`: their verdict, see `duel`)."""
    for w in ws:
        w.close()  # a worker still waiting for a command reads EOF and exits
    ws = [w for w in ws if w.thread.ident is not None]  # started
    deadline = time.monotonic() + grace_s
    for w in ws:
        w.thread.join(max(0.0, deadline - time.monotonic()))
    deadline = time.monotonic() + END_KILL_S
    while True:
        alive = [w for w in ws if w.thread.is_alive()]
        if not alive or time.monotonic() > deadline:
            return
        for w in alive:  # again while the thread lives: one not started yet is caught too
            if w.kill() and not w.stopped:
                w.stopped = why
        for w in alive:
            w.thread.join(0.2)


# A kernel's threads may go on running after its call returns: OpenMP's wait for the next
# parallel region spins for a while (libgomp: some milliseconds by default) before they
# sleep. In a duel that steals a CPU from the other kernel's timed run: on a 2-core
# machine about one run in ten of a microsecond kernel read ~7 ms. Before each run (its
# warm-up and its window) the parent waits until the other worker has no thread running,
# at most SETTLE_MAX_S; a kernel whose threads never stop is rejected (`lingering`). The
# judged kernel's own threads are left as they are: spinning between its calls is how it
# runs for its user, too.
SETTLE_MAX_S = 0.05
SETTLE_POLL_S = 0.0002


def _settle(other: _Worker | None) -> tuple[float, bool]:
    """Wait until no thread of `other` is running (see above); (ms waited, settled).

    When the wait runs out, the other worker counts as unsettled only if its threads
    really ran for most of it (CPU time from schedstat): on a busy machine a team's
    threads can stay runnable for longer, waiting for a CPU to finish their spin, and
    take nothing from anyone meanwhile."""
    if other is None:
        return 0.0, True
    t0 = time.perf_counter()
    c0 = other.cpu_ns()
    while True:
        busy = other.running()
        waited = time.perf_counter() - t0
        if not busy:  # 0, or None where /proc cannot tell
            return waited * 1e3, True
        if waited >= SETTLE_MAX_S:
            c1 = other.cpu_ns()
            if c0 is None or c1 is None:
                return waited * 1e3, False
            ran = max((v[0] - c0.get(t, (0, 0))[0] for t, v in c1.items()), default=0) / 1e9
            return waited * 1e3, ran < 0.5 * waited
        time.sleep(SETTLE_POLL_S)


@dataclass
class Plan:
    """One case's timed runs as the parent picked them (`plan_checks`), the same for
    both kernels: run -> probe index, and the runs whose outputs are checked.

    Saving a checked run's outputs happens in its window (the copy starts the moment the
    call returns, before a thread of the kernel could change them), so with one plan both
    workers take the same steps in every run, and what one needed around a run is what
    the other may (`cpu_disagreement`). Picked by each worker on its own, a short check
    (3 runs) could check all 3 runs of one kernel and 1 of the other: a 4 MB copy's worth
    of CPU in every window of one and not the other, and an honest kernel was rejected."""

    probe_at: dict[int, int]
    checked: set[int]


def _plans(h: Harness, reps: int) -> dict[str, Plan]:
    pick = random.SystemRandom()
    out = {}
    for c in h.cases:
        d = h.data(c)
        out[case_key(c)] = Plan(*plan_checks(reps, len(d.input_files),
                                             [p.set for p in d.probes], pick))
    return out


def _timed_batch(w: _Worker, cid: str, r: int, start: int, n: int, warm: int,
                 step: float, plan: Plan, other: _Worker | None = None,
                 cpu: int | None = None, cpus: list[int] | None = None) -> Batch:
    """Round r's batch of n timed runs of one kernel, one run per window: the worker sets
    each run up (poisoned outputs, the plan's probe, the flush when cold), says `warm`,
    the parent waits for the other kernel's worker to go idle (`_settle`), and the
    parent's clock and CPU readings cover only the call, the copy of a checked run's
    outputs and the worker's reply.

    Meanwhile the parent's own thread runs on the CPU the worker's main thread is placed
    on (`cpu`). Woken from the other CPU, the worker's main thread used about 0.15 ms more
    CPU around a call in whole cases, in either worker: on a 2-core VM its CPU had gone
    idle and the steps around the call ran cold (12 runs of 4 small cases, 4 duels: per
    case, a worker's median excess was 0.04-0.09 ms or 0.18-0.22 ms, and an honest
    kernel was rejected). With the parent on that CPU (it waits on the pipe while the
    worker runs) every case read 0.04-0.08 ms in both workers (6 duels)."""
    with _on_cpu(cpu):
        windows: list[tuple[float, float | None, float | None]] = []
        settle: list[float] = []
        unsettled = 0
        per_thread: dict[int, int] = {}
        wait: float | None = 0.0
        for j in range(n):
            # the other worker goes idle before this one's warm-up, not only before its
            # window: a wait between the two would let this kernel's own threads fall asleep
            # in some runs and not in others
            waited, settled = _settle(other)
            threads = w.place(cpu, cpus) if cpu is not None and cpus else 0
            run = start + j
            w.send("go", cid, warm if j == 0 else 0, plan.probe_at.get(run, -1))
            w.expect("warm", cid, timeout_s=step)
            if threads == 1:
                w.place(cpu, cpus)  # the warm-up may have made a team
            more, settled_again = _settle(other)
            settle.append(waited + more)
            unsettled += not (settled and settled_again)
            c0 = w.cpu_ns()
            t0 = time.perf_counter_ns()
            w.send("time", int(run in plan.checked))
            w.expect("done", cid, timeout_s=step)
            t1 = time.perf_counter_ns()
            c1 = w.cpu_ns()
            main = mx = None
            if c0 is not None and c1 is not None:
                deltas = {t: v[0] - c0.get(t, (0, 0))[0] for t, v in c1.items()}
                for t, v in deltas.items():
                    per_thread[t] = per_thread.get(t, 0) + v
                main = deltas.get(w.pid, 0) / 1e6
                mx = max(deltas.values()) / 1e6
                if wait is not None and w.pid in c0 and w.pid in c1:
                    wait += (c1[w.pid][1] - c0[w.pid][1]) / 1e6
            else:
                wait = None
            windows.append(((t1 - t0) / 1e6, main, mx))
        known = all(m is not None for _, m, _ in windows)
        return Batch(r, start, n, sum(o for o, _, _ in windows),
                     sum(m for _, m, _ in windows if m is not None) if known else None,
                     max(per_thread.values()) / 1e6 if known and per_thread else None,
                     wait if known else None, windows, settle, unsettled)


@contextmanager
def _on_cpu(cpu: int | None):
    """The calling thread pinned to `cpu` for the block, its affinity restored after
    (left as it is where there is no CPU or the system refuses)."""
    home = None
    if cpu is not None:
        try:
            home = os.sched_getaffinity(0)
            os.sched_setaffinity(0, {cpu})
        except (AttributeError, OSError, ValueError):
            home = None
    try:
        yield
    finally:
        if home is not None:
            try:
                os.sched_setaffinity(0, home)
            except OSError:
                pass


def _busy_sample() -> tuple[int, int]:
    try:
        vals = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    except (OSError, ValueError):
        return 0, 0
    return sum(vals), vals[3] + (vals[4] if len(vals) > 4 else 0)


def duel(h: Harness, a: tuple[CompileResult, KernelFile], b: tuple[CompileResult, KernelFile],
         *, reps: int | None = None, rounds: int | None = None,
         cache: dict[str, str] | None = None) -> Duel:
    """Time kernels a and b on every case in alternating rounds (see the module text).

    `reps` timed runs per case and kernel are split over `rounds` batches; `cache` maps
    a case key to `cold` or `warm` (default: each case's state from the op, see
    `Harness.cache_state`)."""
    reps = reps if reps is not None else h.bench.reps
    rounds = max(1, min(rounds or h.bench.rounds, reps))
    cache = cache if cache is not None else {case_key(c): h.cache_state(c) for c in h.cases}
    step = h.limits.timeout_s
    # a worker waits while the other one runs: its wall limit covers both kernels' cases
    wall = step * (2 * len(h.cases) + 2) + 10
    batches: dict[str, dict[str, list[Batch]]] = {"a": {}, "b": {}}
    per_round = [reps // rounds + (1 if r < reps % rounds else 0) for r in range(rounds)]
    busy_acc = [[0, 0] for _ in range(rounds)]
    try:  # the CPU both kernels run on in a round (see `_Worker.place`)
        cpus = sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = []
    plans = _plans(h, reps)
    failed, why, finished = "", "", False
    ws: dict[str, _Worker] = {}
    try:
        # inside the try: whatever raises after the first worker started (the second
        # one's setup, a handshake), the `finally` ends every worker that was started
        for who, (comp, kf) in (("a", a), ("b", b)):
            ws[who] = _Worker(h, who, comp, kf, reps, cache, wall)
            ws[who].start()
        for w in ws.values():
            w.expect("loaded", timeout_s=step)
            w.find_pid()
        for ci, c in enumerate(h.cases):
            cid, key = f"{c.group}{c.index}", case_key(c)
            for w in ws.values():
                w.expect("ready", cid, timeout_s=step)
            warm = 1 if cache.get(key) == "warm" else 0
            start = 0
            for r in range(rounds):
                order = ("a", "b") if (r + ci) % 2 == 0 else ("b", "a")
                t_all0, i_all0 = _busy_sample()
                for who in order:
                    batches[who].setdefault(key, []).append(
                        _timed_batch(ws[who], cid, r, start, per_round[r], warm, step,
                                     plans[key], ws["b" if who == "a" else "a"],
                                     cpus[(r // 2 + ci) % len(cpus)] if cpus else None, cpus))
                t_all1, i_all1 = _busy_sample()
                busy_acc[r][0] += t_all1 - t_all0
                busy_acc[r][1] += i_all1 - i_all0
                start += per_round[r]
            for w in ws.values():
                w.send("end", cid)
                w.expect("saved", cid, timeout_s=step)
        for w in ws.values():
            w.expect("bye", timeout_s=step)
        finished = True
    except _Fail as e:
        failed, why = e.who, e.why
    finally:
        _end(list(ws.values()), step if finished else END_GRACE_S,
             f"the worker did not exit within {step:.0f} s of its last reply (killed)"
             if finished else "stopped by the parent: the duel ended early")
    runs = {}
    for who, w in ws.items():
        failure = why if who == failed else w.stopped
        run = w.run
        if run is None:  # killed, and its sandbox still not ended
            run = SandboxRun(None, True, 0.0, "", "", "")
            failure = failure or "the worker's sandbox did not end when killed"
        runs[who] = h.collect(run, w.job, w.out_dir, w.kf, failure=failure,
                              checked={k: p.checked for k, p in plans.items()})
    busy = [1.0 - i / t if t > 0 else 0.0 for t, i in busy_acc]
    return Duel(runs["a"], runs["b"], rounds, batches, busy, failed)


# -- the parent's clock against the worker's report -------------------------------------
@dataclass
class Other:
    """The other kernel of the duel on the same case: its reported times and batches (the
    same rounds, the same code path around its calls)."""

    times: list[float]
    batches: list[Batch]


def clock_disagreement(times: list[float], batches: list[Batch],
                       other: Other | None = None) -> str:
    """Why a worker's reported times for one case cannot be true, or "" when they agree
    with what the parent measured around each batch.

    Reported times the parent contradicts: more runs (or fewer) than the parent asked
    for; a batch whose reported runs add up to more than the parent's clock measured
    (the calls happen inside its window); or a worker whose threads used more CPU time
    than the batch's reported runs took, beyond what the other kernel's worker needed
    around its own runs (see `cpu_disagreement`). The wall time a batch leaves
    unexplained is not judged: waking the worker up on a busy machine takes
    milliseconds, more for a kernel whose threads spin after their parallel region, and
    that is not a forged time."""
    want = sum(b.n for b in batches)
    if len(times) != want:
        return (f"the worker reported {len(times)} timed runs, the parent ran {want} "
                "(tampered report?)")
    for b in batches:
        rep = float(sum(times[b.start: b.start + b.n]))
        if rep > b.outside_ms * 1.01 + 0.02:
            return (f"the worker reported {rep:.4g} ms for a batch of {b.n} runs that the "
                    f"parent timed at {b.outside_ms:.4g} ms")
    return cpu_disagreement(times, batches, other)


# CPU time cannot be forged from inside the process and does not grow while a thread
# waits (a busy machine preempting the worker adds wall time, not CPU time). Every timed
# run has its own window (`_timed_batch`): the main thread of an honest worker uses, in
# it, the CPU its call took plus the interpreter's steps around it (reading the pipe, a
# copy of checked outputs, the reply): its *excess*, CPU minus reported time. The other
# kernel's worker takes the same steps on the same case: its median excess over the
# case's windows (at least 0: a call preempted on a busy machine reports more than it
# used) is what a worker needs around a run. The judged kernel's excess beyond that is
# taken per window, and the median is judged by the lower end of its rank-based 95%
# confidence interval (as the gate judges speedups): a window in which the machine
# stalled the worker moves it by one rank, not by its size; a report forged in most runs
# moves every one. A case is rejected when that bound is more than CPU_SLACK_MS +
# CASE_SHARE of the case's median reported run; the whole duel when, over all its cases'
# runs of at least POOLED_MIN_MS, the bound of the excess beyond CPU_SLACK_MS is more
# than POOLED_SHARE of the reported time (a small forgery spread over every case). A
# disagreement is confirmed by a second duel before the kernel is rejected
# (`crosschecked_duel`): a machine that stalls an honest worker in most runs twice
# running is unlikely, a forged report disagrees every time. Without the other kernel,
# the main thread may use OTHERLESS_SLACK_MS beyond its reported run. Another thread (a
# kernel's own, or OpenMP's, which spin a while after their parallel region) gets
# THREAD_SLACK_MS beyond, in every run: schedstat brings a running thread's time up to
# date only at a scheduler tick (4 ms at HZ=250, 10 ms at HZ=100), so a team thread
# spinning when a window opens shows up to a tick it used before the window (an honest
# rmsnorm read 3.98 ms of CPU for a 0.67 ms run in every run of a suite).
CPU_SLACK_MS = 0.05
CASE_SHARE = 0.25
POOLED_SHARE = 0.10
POOLED_MIN_MS = 0.25  # runs shorter than this are judged by the absolute slack only
OTHERLESS_SLACK_MS = 0.3
THREAD_SLACK_MS = 12.0


def _median(vals: list[float]) -> float:
    v = sorted(vals)
    n = len(v)
    return v[n // 2] if n % 2 else (v[n // 2 - 1] + v[n // 2]) / 2


def _median_low(vals: list[float]) -> float:
    """The lower end of the rank-based >= 95% confidence interval of the median (the
    least value with fewer than 6 values)."""
    return sorted(vals)[median_ci_ranks(len(vals))[0] - 1]


def _reported(times: list[float], b: Batch) -> float:
    return float(sum(times[b.start: b.start + b.n]))


def runs(times: list[float], batches: list[Batch]
         ) -> list[tuple[float, float | None, float | None]]:
    """Per window: (reported ms, the main thread's CPU ms, the most CPU ms of a thread).
    A batch without per-run windows is one window."""
    out = []
    for b in batches:
        if len(b.windows) == b.n:
            out += [(float(times[b.start + k]), m, x) for k, (_, m, x) in enumerate(b.windows)]
        else:
            out.append((_reported(times, b), b.cpu_main_ms, b.cpu_max_ms))
    return out


def needed_around(other: Other | None) -> float | None:
    """What the other kernel's worker needed around a run: its median excess, >= 0
    (None without the other kernel or its CPU readings)."""
    if other is None or len(other.times) != sum(b.n for b in other.batches):
        return None
    ex = [m - r for r, m, _ in runs(other.times, other.batches) if m is not None]
    return max(0.0, _median(ex)) if ex else None


def excess_beyond(times: list[float], batches: list[Batch], other: Other | None
                  ) -> list[tuple[float, float]]:
    """Per run: (the main thread's excess beyond what the other worker needed around a
    run (beyond OTHERLESS_SLACK_MS without it), the reported time)."""
    around = needed_around(other)
    allow = OTHERLESS_SLACK_MS if around is None else around
    return [(m - r - allow, r) for r, m, _ in runs(times, batches) if m is not None]


def cpu_disagreement(times: list[float], batches: list[Batch],
                     other: Other | None = None) -> str:
    """Why the CPU time the parent read for the worker's threads contradicts the reported
    times of one case (see above), or ""."""
    if not batches or any(b.cpu_max_ms is None or b.cpu_main_ms is None for b in batches):
        return ""
    around = needed_around(other)
    diffs = excess_beyond(times, batches, other)
    if diffs:
        low = _median_low([d for d, _ in diffs])
        rep = _median([r for _, r in diffs])
        if low > CPU_SLACK_MS + CASE_SHARE * rep:
            beyond = (f"beyond the {around:.3g} ms the other kernel's worker needed around "
                      "a run") if around is not None else f"beyond {OTHERLESS_SLACK_MS} ms"
            return (f"the worker's main thread used more CPU time than its reported runs "
                    f"took: at least {low:.3g} ms per run (the median over {len(diffs)} "
                    f"runs, lower 95% bound) {beyond}, on {rep:.3g} ms reported: its "
                    "reported runs are shorter than they took")
    slack = THREAD_SLACK_MS + (around + CPU_SLACK_MS if around is not None
                               else OTHERLESS_SLACK_MS)
    least = min((x - r, x, r) for r, _, x in runs(times, batches) if x is not None)
    if least[0] > slack:
        return (f"in every run a thread of the worker used more CPU time than the run's "
                f"reported time (at best {least[1]:.4g} ms of CPU for {least[2]:.4g} ms "
                "reported): its reported runs are shorter than they took")
    return ""


def pooled_disagreement(cases: list[tuple[list[float], list[Batch], Other | None]]) -> str:
    """Over every case of the duel: the median, over all runs, of the excess (beyond what
    the other kernel's worker needed) beyond CPU_SLACK_MS, relative to the reported
    time; a reason when its lower bound is more than POOLED_SHARE, else ""."""
    rel = []
    for times, batches, other in cases:
        if needed_around(other) is None or any(b.cpu_main_ms is None for b in batches):
            continue  # only judged against the other kernel's worker
        rel += [(d - CPU_SLACK_MS) / r for d, r in excess_beyond(times, batches, other)
                if r >= POOLED_MIN_MS]
    if len(rel) >= 5 and _median_low(rel) > POOLED_SHARE:
        return (f"over all {len(rel)} runs of {POOLED_MIN_MS} ms or more, the worker's "
                f"main thread used more CPU time than its reported runs took: the median "
                f"run by at least {_median_low(rel):.0%} of its reported time (lower 95% "
                "bound) beyond what the other kernel's worker needed: its reported runs are "
                "shorter than they took")
    return ""


def lingering(d: Duel, who: str) -> str:
    """Why kernel `who` is rejected for threads that go on running after its calls
    return (before most of the other kernel's runs the parent waited SETTLE_MAX_S for
    them in vain, see `_settle`), or ""."""
    other = "b" if who == "a" else "a"
    batches = [b for bs in d.batches.get(other, {}).values() for b in bs]
    stuck, total = sum(b.unsettled for b in batches), sum(b.n for b in batches)
    if total and 2 * stuck > total:
        return (f"a thread of the kernel kept running after its calls returned: before "
                f"{stuck} of the other kernel's {total} timed runs the parent waited "
                f"{SETTLE_MAX_S * 1e3:.0f} ms for it to stop, in vain (it takes a CPU from "
                "whatever runs next)")
    return ""


def crosscheck(d: Duel, who: str) -> str:
    """The first case where kernel `who`'s reported times disagree with what the parent
    measured, as a rejection reason (then all cases together); "" when they agree.
    A kernel whose threads never stop running after its calls return (`lingering`) is
    rejected first."""
    other = "b" if who == "a" else "a"
    why = lingering(d, who)
    if why:
        return why
    run, orun = (d.a, d.b) if who == "a" else (d.b, d.a)

    def wall(r: KernelRun, key: str) -> list[float]:
        # a timing of N back-to-back runs (CUDA, short plans) reports the time per run:
        # the parent's clock saw all N
        n = r.repeats.get(key, 1)
        return [t * n for t in r.samples.get(key, [])]

    cases = []
    for key, batches in d.batches.get(who, {}).items():
        ob = d.batches.get(other, {}).get(key, [])
        theirs = Other(wall(orun, key), ob) if ob else None
        why = clock_disagreement(wall(run, key), batches, theirs)
        if why:
            return f"timings disagree with the parent's clock in case {key}: {why}"
        cases.append((wall(run, key), batches, theirs))
    why = pooled_disagreement(cases)
    return f"timings disagree with the parent's clock: {why}" if why else ""


def crosschecked_duel(h: Harness, a: tuple[CompileResult, KernelFile],
                      b: tuple[CompileResult, KernelFile], *, reps: int | None = None,
                      rounds: int | None = None) -> tuple[Duel, str]:
    """A duel whose challenger `a` is held to the parent's clock: when its report
    disagrees, the duel is run once more, and the kernel is judged by the second one
    (the reason names both when it disagrees again). Returns the duel the caller judges
    and the rejection reason ("" when the clock agrees). A duel in which a kernel failed
    is returned as it is: its failure is the verdict."""
    d = duel(h, a, b, reps=reps, rounds=rounds)
    if d.failed or not d.a.correct or not d.b.correct:
        return d, ""
    first = crosscheck(d, "a")
    if not first:
        return d, ""
    d = duel(h, a, b, reps=reps, rounds=rounds)
    if d.failed or not d.a.correct or not d.b.correct:
        return d, ""
    again = crosscheck(d, "a")
    clock = "timings disagree with the parent's clock"
    where = first.split(":", 1)[0].replace(clock, "").strip() if first.startswith(clock) else ""
    return d, (f"{again}; the first of two duels disagreed too{' ' + where if where else ''}"
               if again else "")
