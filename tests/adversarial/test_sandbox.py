"""Attacks on the machine: files, network, processes, memory, the compiler.

The kernels here get past the static check and the symbol allow-list on purpose: they
import nothing forbidden, but find `dlsym` in the C library's dynamic symbol table from
the address of memcpy and every other function through it. What stops them is the
sandbox: under bubblewrap its read-only root and empty network namespace; under the
stock confinement Landlock (writes only in the scratch directory, home hidden), the
network namespace and the seccomp filter (no sockets); the worker's seccomp guard (no
new processes); RLIMIT_AS, the timeouts, and the rule that a CPU worker's own output
never reaches a verdict. Every test runs under each confinement available here (the
`confinement` fixture in conftest.py).
"""

from __future__ import annotations

import socket
import sys
import uuid
from pathlib import Path

import pytest

from tests.adversarial.conftest import (
    CONFINEMENT_NAMES,
    KERNELS,
    MARKER,
    PASSWD_LINES,
    TINY,
    assert_judged_normally,
    assert_rejected,
    fresh_copy,
    judge,
    marker_places,
    needs_resolver,
)

KERNELS_USED = {"write_outside_evasive.cpp", "write_outside_silent.cpp", "network_evasive.cpp",
                "fork_bomb_evasive.cpp",
                "alloc_unbounded.cpp", "reads_host_file_evasive.cpp", "compile_bomb.cpp",
                "fake_load_error.cpp"}

# what a refused write returns, per confinement: EROFS (bubblewrap's read-only root),
# EACCES (Landlock)
WRITE_REFUSED = {"bwrap": "-30", "stock": "-13"}
# what a refused connection returns: ENETUNREACH / ECONNREFUSED (an empty network
# namespace), EAFNOSUPPORT (the seccomp filter refuses the socket), EACCES (Landlock TCP)
NET_REFUSED = {"bwrap": "-(101|111)", "stock": "-(101|111|97|13)"}


@needs_resolver
def test_write_outside_scratch_is_refused(contained):
    """openat(O_CREAT) outside the scratch directory is refused (EROFS under bubblewrap,
    EACCES under Landlock); no marker file appears; the check says which confinement."""
    j = judge("write_outside_evasive.cpp")
    # the kernel puts what openat("/tmp/...") returned into out[0]
    assert_rejected(j, rf"worst at \[0\]: got {WRITE_REFUSED[contained]},")
    assert j.doc["sandbox"].startswith(CONFINEMENT_NAMES[contained]), j.doc["sandbox"]
    found = [p / MARKER for p in marker_places() if (p / MARKER).exists()]
    assert not found, found


@needs_resolver
def test_quiet_write_outside_by_pasted_names_creates_nothing(contained):
    """The attack that once passed: correct math, and files created outside the scratch
    directory through calls the library does not import (libc open/mkdir and syscall()
    by number, found through dlsym). It is judged correct (nothing in its output tells),
    and no file exists afterwards anywhere it tried."""
    j = judge("write_outside_silent.cpp")
    assert_judged_normally(j)
    assert j.doc["sandbox"].startswith(CONFINEMENT_NAMES[contained]), j.doc["sandbox"]
    places = {*marker_places(), Path("/dev/shm")}
    found = [p / f"{MARKER}_silent_{k}" for p in places for k in ("open", "nr", "dir")
             if (p / f"{MARKER}_silent_{k}").exists()]
    assert not found, found


@needs_resolver
def test_network_connection_is_unreachable(tmp_path, contained):
    """connect() to the outside: ENETUNREACH (-101). connect() to a port this test
    listens on at 127.0.0.1: ECONNREFUSED (-111), the sandbox's own empty loopback.
    Under the stock confinement the seccomp filter refuses the socket first (-97)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(4)
        port = listener.getsockname()[1]
        src = (KERNELS / "network_evasive.cpp").read_text()
        kernel = tmp_path / "network_evasive_port.cpp"
        kernel.write_text(src.replace("knobs: {PORT: 22}", f"knobs: {{PORT: {port}}}", 1))
        j = judge(kernel)
        listener.setblocking(False)
        with pytest.raises(BlockingIOError):
            listener.accept()  # nobody reached the host's loopback
    assert_rejected(j, rf"worst at \[[01]\]: got {NET_REFUSED[contained]},")
    rows = {r["case"]: r for r in j.doc["rows"]}
    assert rows["rows=256,cols=1024"]["failing_indices"] == [[0], [1]], rows
    assert "got 0," not in j.reason


@needs_resolver
def test_fork_bomb_is_refused_then_next_kernel_is_judged_normally(tmp_path):
    """The fork bomb reaches fork and a raw clone through dlsym: the worker's seccomp guard
    refuses both with EPERM (the kernel writes -1 for each, and stops multiplying), so
    the bomb never starts; the check ends at once and the next kernel is judged normally
    (behind the guard: the pids cap, the timeout and the PID namespace)."""
    j = judge("fork_bomb_evasive.cpp", timeout=3)
    assert_rejected(j, r"first call, input set 0: out: 2 of 256 elements outside tolerance .*"
                       r"worst at \[[01]\]: got -1,")
    rows = {r["case"]: r for r in j.doc["rows"]}
    assert rows["rows=256,cols=1024"]["failing_indices"] == [[0], [1]], rows
    assert j.seconds < 60, j.seconds
    nxt = judge(fresh_copy(TINY / "baseline.cpp", tmp_path))
    assert_judged_normally(nxt)


def test_unbounded_allocation_is_a_crash_verdict():
    """RLIMIT_AS makes the allocation fail; the uncaught bad_alloc aborts the worker."""
    j = judge("alloc_unbounded.cpp")
    assert_rejected(j, r"kernel crashed with SIG(ABRT|SEGV|KILL) in case typical\[0\]")
    assert j.seconds < 60, j.seconds


@needs_resolver
def test_host_file_read_at_run_time_does_not_reach_the_output():
    """The kernel prints /etc/passwd on the worker's stderr and exits 3: the verdict
    says it exited, and quotes nothing the worker printed."""
    j = judge("reads_host_file_evasive.cpp")
    assert_rejected(j, r"^kernel exited with code 3 in case typical\[0\] \([^)]*\)$")
    assert "root:" not in j.stdout + j.stderr


def test_compile_bomb_ends_within_limits_then_next_kernel_compiles(tmp_path):
    env = {"KERNELCREW_COMPILE_TIMEOUT": "5"}
    j = judge(fresh_copy(TINY.parent.parent / "kernels" / "compile_bomb.cpp", tmp_path),
              env=env)
    assert_rejected(j, r"compile timed out after 5 s|compiler killed")
    assert j.seconds < 5 + 30, j.seconds
    nxt = judge(fresh_copy(TINY / "baseline.cpp", tmp_path), env=env)
    assert_judged_normally(nxt)
    assert nxt.doc["compile"]["cached"] is False


@needs_resolver
def test_home_directory_is_hidden(tmp_path, contained):
    """A file in the home directory of the user running kernelcrew cannot be opened:
    the sandbox shows an empty home. (The kernel exits with code 3 when its read
    succeeds; when it fails, it writes a wrong answer instead.)"""
    secret = Path.home() / f".kernelcrew_adv_secret_{uuid.uuid4().hex[:8]}"
    secret.write_text("token=kernelcrew-adversarial-suite\n")
    try:
        src = (KERNELS / "reads_host_file_evasive.cpp").read_text()
        kernel = tmp_path / "reads_home_file.cpp"
        kernel.write_text(src.replace('"/etc/passwd"', f'"{secret}"'))
        j = judge(kernel)
    finally:
        secret.unlink()
    assert_rejected(j, r"^wrong result in typical case .*outside tolerance")
    assert "kernelcrew-adversarial-suite" not in j.stdout + j.stderr


@needs_resolver
def test_fake_load_error_names_nothing_from_outside_the_source(tmp_path):
    """A constructor prints passwd's first line as an 'undefined symbol' and exits: the
    verdict says a symbol was undefined, and names none. The same library loaded by a
    confined Python of its own (the way a worker loads it, the stderr kept) shows what
    the kernel tried to pass on: the channel the verdict closes."""
    j = judge("fake_load_error.cpp")
    assert_rejected(j, r"^kernel exited with code 1 while loading the kernel: "
                       r"an undefined symbol$")
    first = PASSWD_LINES[0] if PASSWD_LINES else ""
    smuggled = "".join(c if c.isalnum() else "_" for c in first)
    assert not smuggled or smuggled not in j.stdout + j.stderr
    if smuggled:
        from kernelcrew.tools.sandbox import run_confined

        r = run_confined([sys.executable, "-c", "import ctypes, sys; ctypes.CDLL(sys.argv[1])",
                          j.doc["compile"]["artifact"]], scratch=tmp_path / "load",
                         timeout_s=60)
        assert r.returncode == 1, r.describe()
        assert f"undefined symbol: {smuggled}" in r.stderr  # what the verdict left out
