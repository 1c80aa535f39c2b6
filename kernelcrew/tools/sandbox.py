"""Run untrusted work (a kernel's worker, a compiler on untrusted source) confined.

With bubblewrap: a read-only view of the machine, the scratch directory as the only
writable place, no network, own PID namespace (so every process a kernel starts dies
with it). Always: resource limits (CPU seconds, address space, file size, process
count, no core files) and a wall-clock timeout that kills the whole process group.
"""

from __future__ import annotations

import functools
import os
import resource
import shutil
import signal
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

BWRAP_ENV = "KERNELCREW_SANDBOX"  # "bwrap" | "limits": force one (tests, debugging)


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
        sig = -rc if rc is not None and rc < 0 else (
            rc - 128 if self.sandbox == "bubblewrap" and rc is not None and 128 < rc < 160 else None)
        if sig is None:
            return None
        try:
            return signal.Signals(sig).name
        except ValueError:
            return f"signal {sig}"

    def describe(self) -> str:
        """One line: why the process did not finish normally."""
        if self.timed_out:
            return f"timed out after {self.seconds:.1f} s (killed)"
        if self.signal_name:
            return f"crashed with {self.signal_name}"
        if self.returncode:
            last = (self.stderr.strip().splitlines() or [""])[-1][:200]
            return f"exited with code {self.returncode}" + (f": {last}" if last else "")
        return "finished"


@functools.cache
def bwrap_path() -> str | None:
    """bubblewrap if it is installed and works here (it needs namespaces)."""
    if os.environ.get(BWRAP_ENV) == "limits":
        return None
    exe = shutil.which("bwrap")
    if not exe:
        return None
    try:
        r = subprocess.run([exe, "--ro-bind", "/", "/", "--dev", "/dev", "--unshare-all",
                            "--die-with-parent", "true"], capture_output=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return exe if r.returncode == 0 else None


def sandbox_description() -> str:
    if bwrap_path():
        return "bubblewrap (read-only root, scratch-only writes, no network, own PID space) + limits"
    return ("limits only (bubblewrap not available): CPU/memory/file-size/process limits and a "
            "timeout, but the kernel can read and write what this user can and reach the network")


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


def _limits_preexec(cpu_s: int, as_bytes: int, fsize: int, nproc: int, nofile: int):
    def apply() -> None:
        os.setsid()
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        resource.setrlimit(resource.RLIMIT_CPU, (cpu_s, cpu_s + 1))
        resource.setrlimit(resource.RLIMIT_AS, (as_bytes, as_bytes))
        resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))
        resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))
        resource.setrlimit(resource.RLIMIT_NPROC, (nproc, nproc))

    return apply


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
    address_space_gib: float = 16.0,
    file_size_mib: int = 2048,
    processes: int = 64,
    open_files: int = 256,
    env: dict[str, str] | None = None,
    log_name: str = "proc",
) -> SandboxRun:
    """Run argv with cwd=scratch under the sandbox; stdout/stderr go to files in scratch."""
    scratch = Path(scratch).resolve()
    scratch.mkdir(parents=True, exist_ok=True)
    bw = bwrap_path()
    cmd = list(argv)
    if bw:
        prefix = [bw, "--die-with-parent", "--unshare-all", "--ro-bind", "/", "/",
                  "--dev", "/dev", "--proc", "/proc"]
        for p in readonly:
            prefix += ["--ro-bind", str(p), str(p)]
        prefix += ["--bind", str(scratch), str(scratch), "--chdir", str(scratch)]
        cmd = prefix + ["--"] + cmd
        # inside a user namespace root has no privilege over the host, so RLIMIT_NPROC
        # binds; it counts every process of the (outside) user, hence the offset
    nproc = _count_user_processes() + processes + 8
    full_env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(scratch),
                "TMPDIR": str(scratch), "LANG": "C.UTF-8"}
    full_env.update(env or {})
    out_p, err_p = scratch / f"{log_name}.stdout", scratch / f"{log_name}.stderr"
    t0 = time.monotonic()
    with open(out_p, "wb") as out, open(err_p, "wb") as err:
        proc = subprocess.Popen(
            cmd, cwd=scratch, stdin=subprocess.DEVNULL, stdout=out, stderr=err, env=full_env,
            preexec_fn=_limits_preexec(
                int(cpu_s if cpu_s is not None else timeout_s * (os.cpu_count() or 1) + 5),
                int(address_space_gib * 2**30), int(file_size_mib * 2**20), nproc, open_files),
        )
        timed_out = False
        try:
            proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            timed_out = True
        finally:
            # kill the whole group: threads/children a kernel left running go too
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            proc.wait()
    return SandboxRun(
        returncode=None if timed_out else proc.returncode,
        timed_out=timed_out,
        seconds=time.monotonic() - t0,
        stdout=_tail(out_p),
        stderr=_tail(err_p),
        sandbox="bubblewrap" if bw else "limits only",
    )
