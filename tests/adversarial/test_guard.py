"""The seccomp guard a CPU worker puts on itself before it loads a kernel
(`kernelcrew.tools.confine.install_guard`), shown on a real confined process.

A Python snippet runs confined the way the harness starts a worker (`run_confined`),
installs the guard, then tries each call the guard refuses, by its libc wrapper where
Python has one and by raw system call number: each must fail with EPERM (what a refused
call returns), while threads, Python's and an OpenMP team's, still work. Calls that would
create a process are only tried once fork has been seen refused, and an exec only on a
path that does not exist (refused: EPERM; allowed: ENOENT), so a broken guard cannot run
anything.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from kernelcrew.tools.confine import GUARD
from kernelcrew.tools.sandbox import SANDBOX_ENV, available_confinements, run_confined, stock_layers

EPERM, ENOSYS = 1, 38

SNIPPET = r"""
import ctypes, json, os, signal, sys, threading
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
NR = {"x86_64": {"fork": 57, "vfork": 58, "clone": 56, "clone3": 435, "execve": 59,
                 "alarm": 37, "timer_create": 222, "rt_sigaction": 13},
      "aarch64": {"clone": 220, "clone3": 435, "execve": 221, "timer_create": 107,
                  "rt_sigaction": 134}}
def raw(name, *args):  # a system call by number: "ok", minus errno, or "n/a"
    nr = NR.get(os.uname().machine, {}).get(name)
    if nr is None:
        return "n/a"
    r = libc.syscall(ctypes.c_long(nr), *[ctypes.c_char_p(a) if isinstance(a, bytes)
                                           else ctypes.c_long(a) for a in args])
    if r == 0 and name in ("fork", "vfork", "clone", "clone3"):
        os._exit(0)  # the child of a call that should have been refused
    return "ok" if r >= 0 else -ctypes.get_errno()
def attempt(fn):
    try:
        fn()
        return "ok"
    except OSError as e:
        return -e.errno
def fork():  # a child that exits at once, waited for
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)
def openmp(lib):
    f = ctypes.CDLL(lib).team_size
    f.restype = ctypes.c_int
    return f()
guard = sys.argv[1] == "1"
if guard:
    from kernelcrew.tools.confine import install_guard
    install_guard()
got = {"fork": attempt(fork)}
if got["fork"] != "ok":  # the calls that make a process, only once fork is seen refused
    got["raw_fork"] = raw("fork")
    got["vfork"] = raw("vfork")
    got["clone_process"] = raw("clone", 17, 0, 0, 0, 0)  # SIGCHLD: a new process
    args = (ctypes.c_uint64 * 11)(0, 0, 0, 17)  # struct clone_args: exit_signal SIGCHLD
    got["clone3_process"] = raw("clone3", ctypes.addressof(args), ctypes.sizeof(args))
got["execve"] = attempt(lambda: os.execv("/nonexistent/kernelcrew-guard", ["x"]))
got["raw_execve"] = raw("execve", b"/nonexistent/kernelcrew-guard\0", 0, 0)
got["sigaction"] = attempt(lambda: signal.signal(signal.SIGUSR1, lambda *a: None))
got["sigaction_segv"] = attempt(lambda: signal.signal(signal.SIGSEGV, lambda *a: None))
old = ctypes.create_string_buffer(256)  # reading a handler (no new action) is allowed
got["sigaction_read"] = raw("rt_sigaction", 10, 0, ctypes.addressof(old), 8)
got["setitimer"] = attempt(lambda: signal.setitimer(signal.ITIMER_REAL, 30.0))
got["alarm"] = raw("alarm", 30)
timer = ctypes.c_int(0)
got["timer_create"] = raw("timer_create", 1, 0, ctypes.addressof(timer))  # CLOCK_MONOTONIC
got["sched_setaffinity"] = attempt(lambda: os.sched_setaffinity(0, {min(os.sched_getaffinity(0))}))
seen = []
t = threading.Thread(target=lambda: seen.append(threading.get_native_id()))
t.start()
t.join()
got["thread"] = "ok" if seen and seen[0] != threading.get_native_id() else "failed"
got["openmp_team"] = openmp(sys.argv[2])
print(json.dumps(got))
"""

OPENMP_LIB = r"""
#include <omp.h>
extern "C" int team_size() {
    int n = 0;
#pragma omp parallel num_threads(2)
    {
#pragma omp single
        n = omp_get_num_threads();
    }
    return n;
}
"""

needs_guard = pytest.mark.skipif(os.uname().machine not in GUARD,
                                 reason=f"no worker guard for {os.uname().machine}")
needs_stock = pytest.mark.skipif("stock" not in available_confinements(),
                                 reason="the running kernel allows neither namespaces nor "
                                        "Landlock")


@pytest.fixture(scope="module")
def openmp_lib(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A library whose one function starts an OpenMP team of two and returns its size."""
    gxx = shutil.which("g++")
    if gxx is None:
        pytest.skip("no g++")
    d = tmp_path_factory.mktemp("omp")
    (d / "team.cpp").write_text(OPENMP_LIB)
    subprocess.run([gxx, "-shared", "-fPIC", "-fopenmp", "-O2", "team.cpp", "-o", "team.so"],
                   cwd=d, check=True, capture_output=True)
    return d / "team.so"


def _run(tmp_path: Path, lib: Path, *, guard: bool, layers: dict | None = None) -> dict:
    r = run_confined([sys.executable, "-c", SNIPPET, "1" if guard else "0", str(lib)],
                     scratch=tmp_path / "scratch", readonly=[lib.parent], timeout_s=60,
                     layers=layers,
                     env={"PYTHONPATH": os.pathsep.join(p for p in sys.path if p)})
    assert r.returncode == 0, (r.describe(), r.stderr[-3000:])
    return json.loads(r.stdout.strip().splitlines()[-1])


GUARDED = ["fork", "raw_fork", "vfork", "clone_process", "execve", "raw_execve", "sigaction",
           "sigaction_segv", "setitimer", "alarm", "timer_create"]


@needs_guard
@needs_stock
def test_guard_refuses_processes_exec_signal_handlers_timers(
        tmp_path: Path, openmp_lib: Path, monkeypatch: pytest.MonkeyPatch):
    """Confined as a worker (the stock confinement), with the guard: every call of GUARDED
    fails with EPERM (the calls a machine does not have read "n/a"); a Python thread and an
    OpenMP team of two still start, and a thread may still set its own affinity (LLVM's
    OpenMP runtime does when it starts)."""
    monkeypatch.setenv(SANDBOX_ENV, "stock")
    got = _run(tmp_path, openmp_lib, guard=True)
    refused = {k: got.get(k) for k in GUARDED}
    assert all(v in (-EPERM, "n/a") for v in refused.values()), got
    assert got["fork"] == -EPERM and got["clone_process"] == -EPERM, got
    # clone3's flags live in memory a filter cannot read: the stock sandbox's own filter
    # answers ENOSYS, and libc falls back to clone, whose flags the guard reads
    assert got["clone3_process"] == -ENOSYS, got
    assert got["thread"] == "ok" and got["openmp_team"] == 2, got
    assert got["sched_setaffinity"] == "ok" and got["sigaction_read"] in ("ok", "n/a"), got


@needs_guard
@needs_stock
def test_without_the_guard_the_same_process_could_do_all_of_it(
        tmp_path: Path, openmp_lib: Path, monkeypatch: pytest.MonkeyPatch):
    """The same snippet without the guard, the same confinement: the calls go through (an
    exec of a missing file fails with ENOENT, not EPERM; fork works), so the refusals
    above are the guard's."""
    monkeypatch.setenv(SANDBOX_ENV, "stock")
    got = _run(tmp_path, openmp_lib, guard=False)
    assert got["fork"] == "ok", got
    assert got["execve"] == got["raw_execve"] == -2, got  # ENOENT
    for k in ("sigaction", "setitimer", "alarm", "timer_create", "sched_setaffinity"):
        assert got[k] in ("ok", "n/a"), (k, got)


@needs_guard
@needs_stock
def test_guard_alone_refuses_a_process_made_with_clone3(
        tmp_path: Path, openmp_lib: Path, monkeypatch: pytest.MonkeyPatch):
    """The guard on its own: namespaces and Landlock but not the stock seccomp filter
    (what a worker has under bubblewrap). A new process made with clone3 must be refused."""
    monkeypatch.setenv(SANDBOX_ENV, "stock")
    layers = {**stock_layers(), "seccomp": False}
    got = _run(tmp_path, openmp_lib, guard=True, layers=layers)
    assert got["fork"] == -EPERM, got  # the guard is on
    assert got["clone3_process"] in (-EPERM, -ENOSYS), got
