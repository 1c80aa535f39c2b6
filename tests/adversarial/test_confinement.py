"""What each confinement blocks, shown with real confined processes (Python snippets run
through `run_confined`, the way the harness starts a worker).

The first tests run under each confinement available here (the `confinement` fixture of
conftest.py). The `stock` tests then apply each stock layer on its own (namespaces only,
Landlock only, seccomp only), so each one is shown to block what docs/sandbox.md says.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import uuid
from pathlib import Path

import pytest

from kernelcrew.tools.sandbox import SANDBOX_ENV, available_confinements, run_confined, stock_layers

# run in the confined process: an attempt gives "ok" or minus the errno it failed with
ATTEMPT = r"""
def attempt(fn):
    try:
        fn()
        return "ok"
    except OSError as e:
        return -e.errno
"""

PROBE = ATTEMPT + r"""
import ctypes, json, os, socket, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
def connect(port):
    s = socket.socket()
    s.settimeout(2)
    try:
        s.connect(("127.0.0.1", port))
    finally:
        s.close()
NR = {"x86_64": {"ptrace": 101, "unshare": 272, "clone": 56, "io_uring_setup": 425},
      "aarch64": {"ptrace": 117, "unshare": 97, "clone": 220, "io_uring_setup": 425}}
def raw(name, *args):  # a system call by number: "n/a" on other machines
    nr = NR.get(os.uname().machine, {}).get(name)
    if nr is None:
        return "n/a"
    r = libc.syscall(ctypes.c_long(nr), *[ctypes.c_long(a) for a in args])
    return "ok" if r >= 0 else -ctypes.get_errno()
def in_child(fn):  # an attempt that would change this process, made in a forked child
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.write(w, repr(fn()).encode())
        os._exit(0)
    os.close(w)
    out = os.read(r, 100).decode()
    os.waitpid(pid, 0)
    return eval(out)
def thread():
    import threading
    t = threading.Thread(target=lambda: None)
    t.start()
    t.join()
def write(path):
    with open(path, "w") as f:
        f.write("escaped")
a = json.loads(sys.argv[1])
print(json.dumps({
    "pid": os.getpid(),
    "procs": sum(1 for p in os.listdir("/proc") if p.isdigit()),
    "pid1": attempt(lambda: open("/proc/1/cmdline", "rb").read()) == "ok" and
            open("/proc/1/cmdline", "rb").read().replace(b"\0", b" ").decode(errors="replace"),
    "write_scratch": attempt(lambda: write("inside.txt")),
    "write_outside": attempt(lambda: write(a["outside"])),
    "write_readonly": attempt(lambda: write(os.path.join(a["readonly"], "planted"))),
    "read_readonly": attempt(lambda: open(os.path.join(a["readonly"], "given")).read()),
    "read_home": attempt(lambda: open(a["secret"]).read()),
    "read_system": attempt(lambda: open("/etc/hostname" if os.path.exists("/etc/hostname")
                                        else "/etc/os-release").read()),
    "connect": attempt(lambda: connect(a["port"])),
    "ptrace": in_child(lambda: raw("ptrace", 0, 0, 0, 0)),  # PTRACE_TRACEME
    "unshare": in_child(lambda: raw("unshare", 0x10000000)),  # CLONE_NEWUSER
    "io_uring": raw("io_uring_setup", 1, 0),
    "thread": attempt(thread),
    "subprocess": attempt(lambda: __import__("subprocess").run(["true"], check=True)),
    "numpy": attempt(lambda: __import__("numpy").ones(3).sum()),
}))
"""

EACCES, EPERM, EROFS, EAFNOSUPPORT = 13, 1, 30, 97


@pytest.fixture
def probe(tmp_path):
    """Run PROBE confined; returns what each attempt gave (\"ok\" or minus errno).

    It gets a read-only folder (as the harness gives a worker its inputs), a secret in
    the home directory of the user running this test, a file to create outside its
    scratch directory, and a port this test listens on at 127.0.0.1."""
    scratch = tmp_path / "scratch"
    readonly = tmp_path / "inputs"
    readonly.mkdir()
    (readonly / "given").write_text("input")
    outside = tmp_path / f"outside_{uuid.uuid4().hex[:8]}"
    secret = Path.home() / f".kernelcrew_confinement_secret_{uuid.uuid4().hex[:8]}"
    secret.write_text("token")
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(4)
    listener.setblocking(False)

    def run(layers: dict | None = None) -> dict:
        args = {"outside": str(outside), "readonly": str(readonly), "secret": str(secret),
                "port": listener.getsockname()[1]}
        r = run_confined([sys.executable, "-c", PROBE, json.dumps(args)], scratch=scratch,
                         readonly=[readonly], timeout_s=60, layers=layers,
                         env={"PYTHONPATH": os.pathsep.join(p for p in sys.path if p)})
        assert r.returncode == 0, (r.describe(), r.stderr[-3000:])
        got = json.loads(r.stdout.strip().splitlines()[-1])
        got["created_outside"] = outside.exists()
        got["planted"] = (readonly / "planted").exists()
        try:
            listener.accept()[0].close()
            got["reached_listener"] = True
        except BlockingIOError:
            got["reached_listener"] = False
        return got

    try:
        yield run
    finally:
        secret.unlink()
        listener.close()


def test_confinement_blocks_files_network_home(probe, contained):
    """Under each confinement available: writes only in the scratch directory, the
    inputs readable but not writable, no reading of the home directory (the interpreter
    and NumPy, possibly installed under it, still load), no connection to the host."""
    got = probe()
    assert got["write_scratch"] == "ok", got
    assert got["numpy"] == "ok" and got["read_system"] == "ok", got
    assert got["read_readonly"] == "ok", got
    assert got["write_outside"] in (-EACCES, -EROFS) and not got["created_outside"], got
    assert got["write_readonly"] in (-EACCES, -EROFS) and not got["planted"], got
    assert got["read_home"] in (-EACCES, -2), got  # EACCES (Landlock), ENOENT (empty tmpfs)
    assert got["connect"] != "ok" and not got["reached_listener"], got


def test_worker_has_its_own_pid_space(probe, contained):
    """The confined process sees its own PID space: itself as PID 2 and one process more,
    PID 1, the sandbox's own first process (stock: the launcher, confine.py, which forks
    when it is PID 1 and waits; bubblewrap: bwrap itself). The first process of a PID
    namespace ignores the signals its own namespace sends it when it has no handler for
    them, its own SIGSTOP included: the command runs as PID 2 so that a worker can stop
    itself between calls (see kernelcrew/tools/judge/procs.py)."""
    if contained == "stock" and "pid" not in stock_layers()["namespaces"]:
        pytest.skip("this kernel refuses PID namespaces to unshare here")
    got = probe()
    assert got["pid"] == 2 and got["procs"] == 2, got
    launcher = "confine.py" if contained == "stock" else "bwrap"
    assert launcher in (got["pid1"] or ""), got


@pytest.mark.skipif("stock" not in available_confinements(),
                    reason="the running kernel allows neither namespaces nor Landlock")
class TestStockLayersOneByOne:
    """Each layer of the stock confinement on its own."""

    @pytest.fixture(autouse=True)
    def _stock(self, monkeypatch):
        monkeypatch.setenv(SANDBOX_ENV, "stock")

    def test_network_namespace_alone_cuts_the_host_off(self, probe):
        ns = stock_layers()["namespaces"]
        if "net" not in ns:
            pytest.skip("this kernel refuses network namespaces to unshare here")
        got = probe({"namespaces": ns, "landlock": 0, "seccomp": False})
        assert got["connect"] in (-111, -101), got  # ECONNREFUSED / ENETUNREACH
        assert not got["reached_listener"], got
        assert got["write_outside"] == "ok", got  # files are Landlock's part
        # the launcher is the namespace's PID 1 and runs the command as its child
        assert got["pid"] == 2 or "pid" not in ns, got

    def test_landlock_alone_confines_files(self, probe):
        abi = stock_layers()["landlock"]
        if not abi:
            pytest.skip("the running kernel has no Landlock")
        got = probe({"namespaces": [], "landlock": abi, "seccomp": False})
        assert got["write_scratch"] == "ok" and got["numpy"] == "ok", got
        assert got["write_outside"] == -EACCES and not got["created_outside"], got
        assert got["write_readonly"] == -EACCES and not got["planted"], got
        assert got["read_readonly"] == "ok", got
        assert got["read_home"] == -EACCES, got
        if abi >= 4:  # TCP connect is a Landlock right from ABI 4
            assert got["connect"] == -EACCES and not got["reached_listener"], got

    def test_seccomp_alone_refuses_sockets_ptrace_namespaces(self, probe):
        if not stock_layers()["seccomp"]:
            pytest.skip(f"no seccomp filter for {os.uname().machine} here")
        got = probe({"namespaces": [], "landlock": 0, "seccomp": True})
        assert got["connect"] == -EAFNOSUPPORT and not got["reached_listener"], got
        assert got["ptrace"] == got["unshare"] == got["io_uring"] == -EPERM, got
        # threads (clone3 refused with ENOSYS: libc falls back to clone) and child
        # processes still work
        assert got["thread"] == got["subprocess"] == got["numpy"] == "ok", got


GPU_PROBE = ATTEMPT + r"""
import json, os, socket, threading
def name_thread(out):  # what the CUDA driver does for each thread it starts
    def run():
        out["own_thread_comm"] = attempt(lambda: open(
            f"/proc/self/task/{threading.get_native_id()}/comm", "w").write("kc-worker"))
    t = threading.Thread(target=run)
    t.start()
    t.join()
got = {}
name_thread(got)
got["process_comm"] = attempt(lambda: open("/proc/self/comm", "w").write("x"))
got["unix_socket"] = attempt(lambda: socket.socket(socket.AF_UNIX).close())
got["inet_socket"] = attempt(lambda: socket.socket(socket.AF_INET).close())
print(json.dumps(got))
"""


@pytest.mark.skipif("stock" not in available_confinements(),
                    reason="the running kernel allows neither namespaces nor Landlock")
class TestStockWithDevices:
    """A GPU worker's stock confinement (device nodes given): the seccomp filter lets
    AF_UNIX sockets through (a driver may talk to a daemon) and still refuses the others,
    and Landlock lets the process write its own threads' /proc entries (the CUDA driver
    fails its initialization when it cannot name its threads) and nothing else of /proc.
    /dev/null stands in for the GPU's nodes: the rules for them are the same."""

    @pytest.fixture(autouse=True)
    def _stock(self, monkeypatch):
        monkeypatch.setenv(SANDBOX_ENV, "stock")

    def _run(self, tmp_path, devices: list[str], tool: list[str] = ()) -> dict:
        r = run_confined([sys.executable, "-c", GPU_PROBE], scratch=tmp_path / "scratch",
                         timeout_s=60, devices=devices, tool=tool,
                         env={"PYTHONPATH": os.pathsep.join(p for p in sys.path if p)})
        assert r.returncode == 0, (r.describe(), r.stderr[-3000:])
        return json.loads(r.stdout.strip().splitlines()[-1])

    def test_gpu_worker_filter_loads_and_keeps_other_sockets_out(self, tmp_path):
        if not stock_layers()["seccomp"]:
            pytest.skip(f"no seccomp filter for {os.uname().machine} here")
        got = self._run(tmp_path, ["/dev/null"])
        assert got["unix_socket"] == "ok", got
        assert got["inet_socket"] == -EAFNOSUPPORT, got

    def test_gpu_worker_may_name_its_threads_and_nothing_more(self, tmp_path):
        if not stock_layers()["landlock"]:
            pytest.skip("the running kernel has no Landlock")
        gpu = self._run(tmp_path, ["/dev/null"])
        assert gpu["own_thread_comm"] == "ok", gpu
        assert gpu["process_comm"] == -EACCES, gpu  # /proc/<pid>/comm: outside task/
        plain = self._run(tmp_path, [])
        assert plain["own_thread_comm"] == -EACCES, plain
        assert plain["unix_socket"] == plain["inet_socket"] == (
            -EAFNOSUPPORT if stock_layers()["seccomp"] else "ok"), plain

    def test_a_tool_starts_the_confined_command_as_its_child(self, tmp_path):
        """A profiler (`tool`) that starts the worker as its child: the child gets every
        layer, and names its own threads (under ncu, the rule for the threads' /proc
        entries used to name ncu's process, and CUDA could not start in the child)."""
        if not stock_layers()["landlock"]:
            pytest.skip("the running kernel has no Landlock")
        spawner = [sys.executable, "-c",
                   "import subprocess, sys; sys.exit(subprocess.call(sys.argv[1:]))"]
        got = self._run(tmp_path, ["/dev/null"], tool=spawner)
        assert got["own_thread_comm"] == "ok", got
        assert got["process_comm"] == -EACCES, got
        if stock_layers()["seccomp"]:
            assert got["inet_socket"] == -EAFNOSUPPORT, got
