"""Run untrusted work (a kernel's worker, a compiler on untrusted source) confined.

Three confinements, the best available one applies (`KERNELCREW_SANDBOX` forces one):

- **bubblewrap** (when installed): a read-only view of the machine, the scratch directory
  as the only writable place, no network, own PID namespace.
- **stock** (what a stock Linux gives, no extra install), layered, each layer where the
  running kernel allows it:
  - namespaces from util-linux `unshare`: own user (where not root), network (empty: no
    route out, its own loopback), mount and PID namespace with a fresh /proc (every
    process a kernel starts dies with it; no other process is visible);
  - Landlock (raw system calls through ctypes; the kernel's Landlock ABI decides what
    it covers): writes only under the scratch directory; reads of the machine except
    the user's home (only the interpreter, import path and cache there) and /dev (only
    null, zero, full, random, urandom and the devices a worker is given); from ABI 4 no
    TCP bind/connect, from ABI 6 no signals and abstract UNIX sockets outside;
  - a seccomp filter (raw BPF, x86-64 and aarch64): no sockets (AF_UNIX only for GPU
    workers), no ptrace or reading other processes' memory, no new namespaces, mounts,
    io_uring, kernel keyrings, modules, BPF, clock or reboot calls.
- **limits only**: none of the above could be set up.

Always: resource limits (CPU seconds, address space, file size, process count, no core
files), a wall-clock timeout that kills the whole process group, and (Linux) death with
the parent: a kernelcrew process that is killed leaves no confined process behind.

The home directory of the user running kernelcrew (keys, tokens, other projects) is
hidden (an empty tmpfs under bubblewrap, no Landlock read rule under stock), except for
what the confined command needs from it: the Python installation and import path,
kernelcrew's cache (compiled artifacts) and the command's own install prefix.

The process count: RLIMIT_NPROC does not bind root (root is exempt, inside a user
namespace too), so where this process may create a pids cgroup (cgroup v1 `pids`, or
a cgroup v2 subtree with the pids controller), every confined run gets its own, capped
at the same count; its member list also lets the harness kill every process the run
left behind.

Landlock, seccomp and the launcher that applies them inside the namespaces are in
`confine.py` (standard library only: it runs as `python -I -S confine.py SPEC -- ARGV`).
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import os
import platform
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from kernelcrew.errors import InputError
from kernelcrew.tools import confine
from kernelcrew.tools.config import cache_dir
from kernelcrew.tools.confine import SECCOMP_MACHINES, landlock_abi

SANDBOX_ENV = "KERNELCREW_SANDBOX"  # "bwrap" | "stock" | "limits": force one (tests, debugging)
BWRAP_ENV = SANDBOX_ENV
CONFINEMENTS = ("bwrap", "stock", "limits")  # best first


@dataclass(frozen=True)
class SandboxRun:
    returncode: int | None  # None when killed for the timeout
    timed_out: bool
    seconds: float
    stdout: str  # tail, trimmed
    stderr: str  # tail, trimmed
    sandbox: str  # how it was confined, in words

    @property
    def signal_name(self) -> str | None:
        rc = self.returncode
        # a direct child reports -N; bubblewrap passes a child's death on as 128 + N
        # (the stock launcher, the first process of its PID namespace, does the same: see
        # confine._reap)
        sig = -rc if rc is not None and rc < 0 else (
            rc - 128 if self.sandbox in ("bubblewrap", "stock") and rc is not None
            and 128 < rc < 160 else None)
        if sig is None:
            return None
        try:
            return signal.Signals(sig).name
        except ValueError:
            return f"signal {sig}"

    def describe(self, *, quote_stderr: bool = True) -> str:
        """One line: why the process did not finish normally.

        `quote_stderr=False` leaves out what the process printed, for a process whose
        output untrusted code controls."""
        if self.timed_out:
            return f"timed out after {self.seconds:.1f} s (killed)"
        if self.signal_name:
            return f"crashed with {self.signal_name}"
        if self.returncode:
            last = (self.stderr.strip().splitlines() or [""])[-1][:200] if quote_stderr else ""
            return f"exited with code {self.returncode}" + (f": {last}" if last else "")
        return "finished"


def bwrap_path() -> str | None:
    """bubblewrap, when it is the confinement workers get."""
    return shutil.which("bwrap") if confinement() == "bwrap" else None


@functools.cache
def _probe_bwrap() -> bool:
    """bubblewrap is installed and works here (it needs namespaces)."""
    exe = shutil.which("bwrap")
    if not exe:
        return False
    try:
        r = subprocess.run([exe, "--ro-bind", "/", "/", "--dev", "/dev", "--unshare-all",
                            "--die-with-parent", "true"], check=False, capture_output=True,
                           timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return r.returncode == 0


def _works(kind: str) -> bool:
    return {"bwrap": _probe_bwrap, "stock": lambda: stock_layers() is not None,
            "limits": lambda: True}[kind]()


def available_confinements() -> list[str]:
    """The confinements that work on this machine, best first ("limits" always does)."""
    return [k for k in CONFINEMENTS if _works(k)]


def confinement() -> str:
    """The confinement workers get: `KERNELCREW_SANDBOX` if set, else the best available."""
    forced = os.environ.get(SANDBOX_ENV, "").strip()
    if not forced:
        return next(k for k in CONFINEMENTS if _works(k))
    if forced not in CONFINEMENTS:
        raise InputError(f"unknown confinement {forced!r}; use one of "
                         f"{', '.join(CONFINEMENTS)}, or unset it", field=SANDBOX_ENV)
    if not _works(forced):
        raise InputError(f"confinement {forced!r} does not work on this machine (available: "
                         f"{', '.join(available_confinements())}); choose another or unset it",
                         field=SANDBOX_ENV)
    return forced


def sandbox_description() -> str:
    kind = confinement()
    if kind == "bwrap":
        desc = ("bubblewrap (read-only root, home directory hidden, scratch-only writes, no "
                "network, own PID space) + limits")
    elif kind == "stock":
        desc = "stock: " + describe_layers(stock_layers()) + " + limits"
    else:
        desc = ("limits only (no bubblewrap, unshare or Landlock confinement): CPU/memory/"
                "file-size/process limits and a timeout, but the kernel can read and write "
                "what this user can and reach the network")
    if pids_cgroup_base() is not None:
        return desc + "; process count capped by a pids cgroup"
    if os.geteuid() == 0:
        return desc + ("; NO process cap: running as root, which RLIMIT_NPROC does not bind, and "
                       "no pids cgroup can be made here (only the timeout stops a fork bomb)")
    return desc


def parent_unreachable() -> str:
    """"" when a confined worker cannot reach the parent's process (its memory through
    /proc, its signals), else why it can: the parent's evidence (the buffers it reads, its
    clock) is then only as safe as the worker's own guard, which does not cover files.
    Reachable under `limits only`, and under the stock confinement with neither a PID
    namespace (which hides the parent) nor Landlock (which refuses /proc/PID/mem for
    writing). A forced `KERNELCREW_SANDBOX=limits` is the user's choice and counts as ""."""
    kind = confinement()
    if kind == "bwrap" or os.environ.get(SANDBOX_ENV, "").strip() == "limits":
        return ""
    layers = stock_layers() if kind == "stock" else None
    if layers and ("pid" in layers["namespaces"] or layers["landlock"]):
        return ""
    return ("the worker ran without a PID namespace or Landlock (" + sandbox_description()
            + "): a kernel could reach the parent's memory, so no win is accepted; install "
            "bubblewrap, enable user namespaces or Landlock, or set KERNELCREW_SANDBOX=limits "
            "to accept results anyway")


# -- the stock confinement: unshare + Landlock + seccomp --------------------------------
# util-linux unshare, best first: with a user namespace (a root worker keeps no capability
# over the machine), then without (root where user namespaces are off), then network only
_UNSHARE_CANDIDATES = (
    ("user", "net", "mount", "pid"),
    ("net", "mount", "pid"),
    ("user", "net"),
)
_UNSHARE_FLAGS = {"user": ["--user", "--map-root-user"], "net": ["--net"], "mount": ["--mount"],
                  "pid": ["--pid", "--fork", "--kill-child", "--mount-proc"]}


def _unshare_prefix(spaces: Sequence[str]) -> list[str]:
    exe = shutil.which("unshare") or "unshare"
    return [exe, *(f for s in spaces for f in _UNSHARE_FLAGS[s])]


@functools.cache
def stock_layers() -> dict | None:
    """What the stock confinement applies here: {"namespaces": [...], "landlock": ABI or 0,
    "seccomp": bool}, or None when no layer works. Probed once: the whole stack runs `true`."""
    abi = landlock_abi()
    secc = platform.machine() in SECCOMP_MACHINES
    spaces = [*(_UNSHARE_CANDIDATES if shutil.which("unshare") else ()), ()]
    # the whole stack, as a worker gets it, best first; a layer the kernel refuses drops
    for ns in spaces:
        if not ns and not abi:
            break  # seccomp alone does not confine files or the network enough to count
        for with_seccomp in dict.fromkeys((secc, False)):
            layers = {"namespaces": list(ns), "landlock": abi, "seccomp": with_seccomp}
            with tempfile.TemporaryDirectory(prefix="kernelcrew-probe-") as tmp:
                try:
                    r = subprocess.run(_stock_command(["true"], layers, Path(tmp), (), ()),
                                       check=False, capture_output=True, timeout=20)
                except (OSError, subprocess.TimeoutExpired):
                    continue
            if r.returncode == 0:
                return layers
    return None


def describe_layers(layers: dict | None) -> str:
    if not layers:
        return "none"
    parts = []
    ns = layers["namespaces"]
    if ns:
        parts.append(f"unshare namespaces ({', '.join(ns)}"
                     + ("" if "net" not in ns else ": no network")
                     + ("" if "pid" not in ns else ", own PID space") + ")")
    else:
        parts.append("no namespaces (unshare not usable here: network and PID space shared)")
    abi = layers["landlock"]
    if abi:
        extra = (", no TCP" if abi >= 4 else "") + (", signals/abstract sockets scoped"
                                                   if abi >= 6 else "")
        parts.append(f"Landlock ABI {abi} (scratch-only writes, home directory hidden{extra})")
    else:
        parts.append("no Landlock (the running kernel lacks it: files are NOT confined)")
    parts.append("seccomp filter (no sockets, ptrace, mounts, new namespaces, io_uring)"
                 if layers["seccomp"] else "no seccomp filter")
    return " + ".join(parts)


def _stock_command(argv: Sequence[str], layers: dict, scratch: Path,
                   readonly: Sequence[Path], devices: Sequence[str],
                   tool: Sequence[str] = (), notify: int | None = None) -> list[str]:
    """unshare ... [tool] python -I -S confine.py SPEC -- argv (the launcher applies the
    rest). A `tool` (a profiler that starts argv as its child) runs inside the namespaces
    but outside Landlock and seccomp, and starts the launcher: the command's own process
    gets every layer, and the rules that name the process itself (its threads' /proc
    entries) name that process, not the tool's."""
    home, keep = home_to_hide(argv)
    hidden = [Path("/dev")] + ([home] if home is not None else [])
    spec = {
        "landlock": layers["landlock"],
        "seccomp": layers["seccomp"],
        "unix_sockets": bool(devices),  # a GPU driver may talk to a daemon over one
        "read": [str(p) for p in [*_read_roots(hidden), *keep, *map(Path, readonly)]],
        "read_files": [*_DEV_READ],
        "write_files": [*_DEV_RW],
        "devices": [str(d) for d in devices],
        "write": [str(scratch)],
    }
    launcher = [sys.executable, "-I", "-S", str(Path(confine.__file__).resolve()),
                *confine.encode_spec(spec), *([f"N:{notify}"] if notify is not None else []),
                "--"]
    ns = layers["namespaces"]
    return [*(_unshare_prefix(ns) if ns else []), *tool, *launcher, *argv]


_DEV_READ = ("/dev/random", "/dev/urandom")
_DEV_RW = ("/dev/null", "/dev/zero", "/dev/full")


def _read_roots(hidden: Sequence[Path]) -> list[Path]:
    """Everything under / except the hidden trees: the entries of / and, along the path
    to each hidden tree, the siblings of its ancestors."""
    roots: list[Path] = []

    def level(d: Path) -> None:
        try:
            entries = sorted(d.iterdir())
        except OSError:
            return
        for e in entries:
            try:
                r = e.resolve()
            except (OSError, RuntimeError):
                continue
            if any(_under(r, h) for h in hidden):
                continue  # hidden (also through a symlink)
            if any(_under(h, r) for h in hidden):
                if not e.is_symlink():
                    level(e)  # an ancestor of a hidden tree: its other entries only
                continue
            roots.append(e)

    level(Path("/"))
    return roots


# -- process cap: a pids cgroup per run -------------------------------------------------
_CGROUP_FS = Path("/sys/fs/cgroup")


def _own_cgroup(controller: str) -> tuple[Path, str] | None:
    """(hierarchy mount, this process's path in it) for a v1 controller, or v2 ("")."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        num, ctrls, path = line.split(":", 2)
        if controller and controller in ctrls.split(","):
            return _CGROUP_FS / controller, path
        if not controller and num == "0" and ctrls == "":
            mount = _CGROUP_FS / "unified" if (_CGROUP_FS / "unified").is_dir() else _CGROUP_FS
            return mount, path
    return None


@functools.cache
def pids_cgroup_base() -> Path | None:
    """A cgroup directory under which this process can make capped pids cgroups, or None."""
    candidates = []
    v1 = _own_cgroup("pids")
    if v1:
        candidates.append(v1[0] / v1[1].lstrip("/"))
    v2 = _own_cgroup("")
    if v2:
        base = v2[0] / v2[1].lstrip("/")
        try:
            if "pids" in (base / "cgroup.subtree_control").read_text().split():
                candidates.append(base)
        except OSError:
            pass
    for base in candidates:
        probe = base / f"kernelcrew-probe-{os.getpid()}-{uuid.uuid4().hex[:6]}"
        try:
            probe.mkdir()
        except OSError:
            continue
        try:
            ok = (probe / "pids.max").exists() and os.access(probe / "cgroup.procs", os.W_OK)
        finally:
            with contextlib.suppress(OSError):
                probe.rmdir()
        if ok:
            return base
    return None


@contextlib.contextmanager
def _pids_cgroup(limit: int) -> Iterator[Path | None]:
    """A fresh pids cgroup capped at `limit` tasks (None where none can be made)."""
    base = pids_cgroup_base()
    cg = None
    if base is not None:
        _sweep_stale_cgroups(base)
        cg = base / f"kernelcrew-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        try:
            cg.mkdir()
            (cg / "pids.max").write_text(str(limit))
        except OSError:
            with contextlib.suppress(OSError):
                cg.rmdir()
            cg = None
    try:
        yield cg
    finally:
        if cg is not None:
            _kill_and_remove(cg)


def _sweep_stale_cgroups(base: Path) -> None:
    """Remove the empty cgroups of kernelcrew processes that died without cleaning up
    (killed with SIGKILL, say): their names carry the owner's pid."""
    for d in base.glob("kernelcrew-*"):
        pid = d.name.removeprefix("kernelcrew-").removeprefix("probe-").split("-")[0]
        if pid.isdigit() and not Path(f"/proc/{pid}").exists():
            with contextlib.suppress(OSError):
                d.rmdir()  # fails, harmlessly, if anything still runs in it


def _kill_and_remove(cg: Path) -> None:
    """Kill whatever is still in the cgroup (children a kernel left behind), then remove it."""
    deadline = time.monotonic() + 5.0
    while True:
        try:
            pids = [int(p) for p in (cg / "cgroup.procs").read_text().split()]
        except (OSError, ValueError):
            pids = []
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        try:
            cg.rmdir()
            return
        except OSError:
            if time.monotonic() > deadline:
                return  # an empty, capped cgroup left behind; harmless
            time.sleep(0.02)


def _count_user_processes() -> int:
    uid = os.getuid()
    n = 0
    for p in Path("/proc").iterdir():
        if p.name.isdigit():
            try:
                if p.stat().st_uid == uid:
                    n += 1 + max(0, len(os.listdir(p / "task")) - 1)
            except OSError:
                pass
    return n


PR_SET_PDEATHSIG = 1


def _prctl():
    """libc's prctl (Linux), looked up before a fork: nothing is loaded in the child."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        return ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None


def _limits_preexec(cpu_s: int, as_bytes: int | None, fsize: int, nproc: int, nofile: int,
                    cgroup: Path | None = None):
    prctl, parent = _prctl(), os.getpid()

    def apply() -> None:
        # the confined process dies with the thread that started it (it waits for it until
        # the end): a parent killed, or ending without its cleanup, leaves no worker behind.
        # The setting survives the exec of unshare / bubblewrap / the command (none is
        # set-user-ID); unshare's --kill-child and bubblewrap's --die-with-parent pass it on
        # to the process inside. A parent that died before the call is checked for after it.
        if prctl is not None:
            prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
            if os.getppid() != parent:
                os._exit(1)
        os.setsid()
        if cgroup is not None:  # join the capped pids cgroup before anything else starts
            with open(cgroup / "cgroup.procs", "w") as f:
                f.write("0")
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        resource.setrlimit(resource.RLIMIT_CPU, (cpu_s, cpu_s + 1))
        if as_bytes is not None:
            resource.setrlimit(resource.RLIMIT_AS, (as_bytes, as_bytes))
        resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))
        resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))
        resource.setrlimit(resource.RLIMIT_NPROC, (nproc, nproc))

    return apply


def _under(path: Path, root: Path) -> bool:
    return path == root or root in path.parents


def home_to_hide(argv: Sequence[str]) -> tuple[Path | None, list[Path]]:
    """(the home directory to hide, the paths inside it to keep visible read-only)."""
    try:
        home = Path.home().resolve()
    except (RuntimeError, OSError):
        return None, []
    if home == Path("/") or not home.is_dir():
        return None, []

    wanted = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix,
              *(p for p in sys.path if p), str(Path(__file__).resolve().parents[2]),
              str(cache_dir())}
    exe = shutil.which(argv[0]) if argv else None
    if exe:  # the command's install prefix (a compiler under ~/miniconda, say)
        wanted |= {str(Path(exe).parent), str(Path(exe).resolve().parent.parent)}
    keep = set()
    for w in wanted:
        p = Path(w)
        for q in (p, p.resolve()) if p.exists() else ():
            if _under(q, home):
                keep.add(q)
    if home in keep:
        return None, []  # the command needs all of it
    # a kept path inside another kept path is covered by it
    return home, sorted(k for k in keep if not any(o != k and _under(k, o) for o in keep))


def _tail(path: Path, limit: int = 20000) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - limit))
            data = f.read().decode(errors="replace")
    except OSError:
        return ""
    return (f"... {size - limit} bytes omitted\n" if size > limit else "") + data


def run_confined(
    argv: Sequence[str],
    *,
    scratch: Path,
    readonly: Sequence[Path] = (),
    timeout_s: float,
    cpu_s: float | None = None,
    address_space_gib: float | None = 16.0,  # None: no RLIMIT_AS (a CUDA driver needs that)
    file_size_mib: int = 2048,
    processes: int = 64,
    open_files: int = 256,
    env: dict[str, str] | None = None,
    log_name: str = "proc",
    devices: Sequence[str] = (),
    layers: dict | None = None,
    tool: Sequence[str] = (),
    pass_fds: Sequence[int] = (),
    on_start: Callable[[int], None] | None = None,
    notify: int | None = None,
    notify_ready: Callable[[bool], None] | None = None,
) -> SandboxRun:
    """Run argv with cwd=scratch under the sandbox; stdout/stderr go to files in scratch.

    `devices` are device nodes the command may use (a GPU's /dev/nvidia*): bound into
    bubblewrap's fresh /dev, or allowed by Landlock. `layers` (stock confinement only)
    applies some of the stock layers instead of all that work here (tests show each
    layer on its own). `tool` is a trusted wrapper that starts argv as its child (`ncu
    ...`, `perf stat ... --`): inside bubblewrap with it; under the stock confinement in
    the namespaces, but outside the Landlock and seccomp layers its child gets (Nsight
    Compute's target could not start CUDA when the rule for its threads' /proc entries
    named ncu's process instead: seen on an H200).

    `pass_fds` stay open in the command (the parent's shared buffers and pipes);
    `on_start` is called with the PID of the sandbox's first process as soon as it
    exists (the caller finds the command's own process below it, see judge.procs);
    `notify`, a pipe's write end: under the stock confinement with a PID namespace the
    launcher writes one byte to it each time the command has stopped (a worker stopping
    itself between calls); `notify_ready` is told, before the command starts, whether
    it will (False: the caller must look for the stop itself)."""
    scratch = Path(scratch).resolve()
    scratch.mkdir(parents=True, exist_ok=True)
    kind = confinement()
    cmd = [*tool, *argv]
    if kind == "bwrap":
        cmd = _bwrap_command(argv, cmd, scratch, readonly, devices)
    elif kind == "stock":
        layers = layers if layers is not None else stock_layers()
        if notify is not None and "pid" in layers["namespaces"]:
            pass_fds = (*pass_fds, notify)
        else:
            notify = None
        cmd = _stock_command(argv, layers, scratch, readonly, devices, tool, notify)
    if notify_ready is not None:
        notify_ready(notify is not None and kind == "stock")
    # RLIMIT_NPROC counts every process and thread of the (outside) user, hence the
    # offset; it does not bind root (inside a user namespace too), so the pids cgroup
    # below is the cap that holds there. Both leave room for one thread per core.
    cap = processes + (os.cpu_count() or 1) + 8
    nproc = _count_user_processes() + cap
    full_env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(scratch),
                "TMPDIR": str(scratch), "LANG": "C.UTF-8"}
    full_env.update(env or {})
    out_p, err_p = scratch / f"{log_name}.stdout", scratch / f"{log_name}.stderr"
    limits = (int(cpu_s if cpu_s is not None else timeout_s * (os.cpu_count() or 1) + 5),
              None if address_space_gib is None else int(address_space_gib * 2**30),
              int(file_size_mib * 2**20), nproc, open_files)
    with (open(out_p, "wb") as out, open(err_p, "wb") as err,
          _pids_cgroup(cap) as cgroup):
        returncode, timed_out, seconds = _spawn_and_wait(
            cmd, scratch, out, err, full_env, pass_fds, (*limits, cgroup), timeout_s, on_start)
    return SandboxRun(
        returncode=returncode,
        timed_out=timed_out,
        seconds=seconds,
        stdout=_tail(out_p),
        stderr=_tail(err_p),
        sandbox={"bwrap": "bubblewrap", "stock": "stock"}.get(kind, "limits only"),
    )


def _bwrap_command(argv: Sequence[str], cmd: list[str], scratch: Path,
                   readonly: Sequence[Path], devices: Sequence[str]) -> list[str]:
    """`cmd` under bubblewrap: the whole tree read-only, a fresh /dev (with the device
    nodes asked for) and /proc, the home folder hidden, the scratch folder writable."""
    prefix = [shutil.which("bwrap") or "bwrap", "--die-with-parent", "--unshare-all",
              "--ro-bind", "/", "/",
              "--dev", "/dev", "--proc", "/proc"]
    for d in devices:  # device nodes the command needs (a GPU's), on top of the fresh /dev
        prefix += ["--dev-bind", str(d), str(d)]
    home, keep = home_to_hide(argv)
    if home is not None:
        prefix += ["--tmpfs", str(home)]
        for p in keep:
            prefix += ["--ro-bind", str(p), str(p)]
    for p in readonly:
        prefix += ["--ro-bind", str(p), str(p)]
    prefix += ["--bind", str(scratch), str(scratch), "--chdir", str(scratch)]
    return prefix + ["--"] + cmd


def _spawn_and_wait(cmd: list[str], scratch: Path, out, err, env: dict[str, str],
                    pass_fds: Sequence[int], limits: tuple, timeout_s: float,
                    on_start: Callable[[int], None] | None) -> tuple[int | None, bool, float]:
    """Start `cmd` in its own session under `limits` (see _limits_preexec), wait for it at
    most `timeout_s`, then kill its whole process group. (returncode or None when it
    timed out, timed out, seconds it ran)."""
    t0 = time.monotonic()
    proc = subprocess.Popen(
        cmd, cwd=scratch, stdin=subprocess.DEVNULL, stdout=out, stderr=err, env=env,
        pass_fds=tuple(pass_fds),
        # preexec_fn is needed for setsid/rlimits/cgroup; workers are started only from
        # graph nodes that run alone (the parallel specialists never spawn processes)
        preexec_fn=_limits_preexec(*limits),  # noqa: PLW1509
    )
    timed_out = False
    try:
        if on_start is not None:
            on_start(proc.pid)
        proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        timed_out = True
    finally:
        # how long it ran: what is left to kill (a fork bomb's thousands of processes on
        # a loaded machine) can take a second more, and is not the kernel's time
        seconds = time.monotonic() - t0
        # kill the whole group: threads/children a kernel left running go too
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        proc.wait()
    return (None if timed_out else proc.returncode), timed_out, seconds

