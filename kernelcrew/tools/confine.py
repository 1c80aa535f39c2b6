"""The layers of the stock confinement a process applies to itself: Landlock and seccomp.

Run as `python -I -S confine.py SPEC... -- ARGV` (inside the namespaces `unshare` made,
see sandbox.py), it applies the Landlock rules and the seccomp filter the SPEC arguments
ask for (see `encode_spec`), then execs ARGV, which inherits both for good. Standard
library only, and few modules of it (ctypes, struct): it starts in every worker, without
the package's dependencies and with no import path a kernel could touch.
A layer that was asked for and fails to apply stops the launch (exit 125): nothing runs
less confined than it was told.
"""

from __future__ import annotations

import ctypes
import os
import stat
import struct
import sys

# Landlock: system call numbers are the same on every architecture
_LL_CREATE, _LL_ADD_RULE, _LL_RESTRICT = 444, 445, 446
_LL_EXECUTE, _LL_WRITE_FILE, _LL_READ_FILE, _LL_READ_DIR = 1, 2, 4, 8
_LL_TRUNCATE, _LL_IOCTL_DEV = 1 << 14, 1 << 15
_LL_FILE_RIGHTS = _LL_EXECUTE | _LL_WRITE_FILE | _LL_READ_FILE | _LL_TRUNCATE | _LL_IOCTL_DEV
_LL_READ = _LL_EXECUTE | _LL_READ_FILE | _LL_READ_DIR


def _ll_fs_rights(abi: int) -> int:
    """Every filesystem right the ABI knows: 13 (ABI 1), + REFER (2), + TRUNCATE (3),
    + IOCTL_DEV (5)."""
    return (1 << (13 if abi < 2 else 14 if abi < 3 else 15 if abi < 5 else 16)) - 1


def _libc():
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    return libc


_ABI: list[int] = []


def landlock_abi() -> int:
    """The running kernel's Landlock ABI version, 0 where Landlock is missing or off."""
    if _ABI:
        return _ABI[0]
    _ABI.append(_probe_abi())
    return _ABI[0]


def _probe_abi() -> int:
    if sys.platform != "linux":
        return 0
    try:
        v = _libc().syscall(ctypes.c_long(_LL_CREATE), None, ctypes.c_long(0),
                            ctypes.c_long(1))  # LANDLOCK_CREATE_RULESET_VERSION
    except (OSError, AttributeError):
        return 0
    return max(0, int(v))


def _landlock_restrict(spec: dict) -> None:
    """Apply the spec's Landlock rules to this process (and all it will exec)."""
    abi = spec["landlock"]
    libc = _libc()
    fs = _ll_fs_rights(abi)
    attr = struct.pack("=QQQ", fs, 3 if abi >= 4 else 0, 3 if abi >= 6 else 0)
    attr = attr[: 8 if abi < 4 else 16 if abi < 6 else 24]
    abuf = ctypes.create_string_buffer(attr, len(attr))
    rfd = libc.syscall(ctypes.c_long(_LL_CREATE), abuf, ctypes.c_long(len(attr)),
                       ctypes.c_long(0))
    if rfd < 0:
        raise OSError(ctypes.get_errno(), "landlock_create_ruleset")
    # /dev/null and friends: opened with O_TRUNC by shells (`> /dev/null`)
    rw = _LL_READ_FILE | _LL_WRITE_FILE | _LL_TRUNCATE
    dev = rw | _LL_IOCTL_DEV
    rules = [*((p, _LL_READ) for p in spec["read"]),
             *((p, _LL_READ_FILE) for p in spec["read_files"]),
             *((p, rw) for p in spec["write_files"]),
             *((p, dev | _LL_READ_DIR) for p in spec["devices"]),
             *((p, fs) for p in spec["write"])]
    if spec["devices"]:
        _allow_own_threads(libc, rfd, fs)
    for path, rights in rules:
        try:
            pfd = os.open(path, os.O_PATH | os.O_CLOEXEC)
        except OSError:
            continue  # not there: nothing to allow
        try:
            allowed = rights & fs
            if not stat.S_ISDIR(os.fstat(pfd).st_mode):
                allowed &= _LL_FILE_RIGHTS
            _add_rule(libc, rfd, pfd, allowed, path)
        finally:
            os.close(pfd)
    if libc.prctl(38, 1, 0, 0, 0) != 0:  # PR_SET_NO_NEW_PRIVS
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS)")
    if libc.syscall(ctypes.c_long(_LL_RESTRICT), ctypes.c_long(rfd), ctypes.c_long(0)) < 0:
        raise OSError(ctypes.get_errno(), "landlock_restrict_self")
    os.close(rfd)


def _add_rule(libc, rfd: int, pfd: int, rights: int, path: str) -> None:
    """Add to the ruleset `rfd` the rights beneath the file or directory open as `pfd`."""
    rule = ctypes.create_string_buffer(struct.pack("=Qi", rights, pfd), 12)
    if libc.syscall(ctypes.c_long(_LL_ADD_RULE), ctypes.c_long(rfd), ctypes.c_long(1),
                    rule, ctypes.c_long(0)) < 0:
        raise OSError(ctypes.get_errno(), f"landlock_add_rule {path}")


def _allow_own_threads(libc, rfd: int, fs: int) -> None:
    """For a process given device nodes (a GPU worker): let it read and write its own
    threads' /proc entries, and nothing else of /proc: the CUDA driver names each thread it
    starts by writing /proc/self/task/<tid>/comm, and fails its initialization (error 304,
    "OS call failed") when it cannot. A Landlock rule binds to an inode, so the rule goes on this process's
    own task directory (the launcher is the process the worker becomes: exec keeps the
    PID), and the directory stays open across the exec: procfs makes a new inode for a
    path whose dentry was dropped, which would no longer carry the rule."""
    pfd = os.open("/proc/self/task", os.O_PATH | os.O_DIRECTORY)
    os.set_inheritable(pfd, True)  # kept open across the exec: pins the inode
    rights = _LL_READ_FILE | _LL_WRITE_FILE | _LL_TRUNCATE | _LL_READ_DIR
    _add_rule(libc, rfd, pfd, rights & fs, "/proc/self/task")


# seccomp: (audit arch, system calls refused with EPERM, socket, clone, clone3) per machine
_SECCOMP_DENY = ("ptrace", "process_vm_readv", "process_vm_writev", "mount", "umount2",
                 "pivot_root", "chroot", "unshare", "setns", "open_tree", "move_mount",
                 "fsopen", "fsconfig", "fsmount", "fspick", "mount_setattr", "bpf", "keyctl",
                 "add_key", "request_key", "kexec_load", "kexec_file_load", "init_module",
                 "finit_module", "delete_module", "reboot", "swapon", "swapoff",
                 "userfaultfd", "open_by_handle_at", "name_to_handle_at", "io_uring_setup",
                 "io_uring_enter", "io_uring_register", "acct", "settimeofday",
                 "clock_settime", "adjtimex", "quotactl")
SECCOMP = {
    "x86_64": (0xC000003E, dict(zip(_SECCOMP_DENY, (
        101, 310, 311, 165, 166, 155, 161, 272, 308, 428, 429, 430, 431, 432, 433, 442, 321,
        250, 248, 249, 246, 320, 175, 313, 176, 169, 167, 168, 323, 304, 303, 425, 426, 427,
        163, 164, 227, 159, 179), strict=True)) | {"iopl": 172, "ioperm": 173},
        41, 56, 435),
    "aarch64": (0xC00000B7, dict(zip(_SECCOMP_DENY, (
        117, 270, 271, 40, 39, 41, 51, 97, 268, 428, 429, 430, 431, 432, 433, 442, 280,
        219, 217, 218, 104, 294, 105, 273, 106, 142, 224, 225, 282, 265, 264, 425, 426, 427,
        89, 170, 112, 171, 60), strict=True)),
        198, 220, 435),
}
_CLONE_NEW_ANY = 0x00020000 | 0x02000000 | 0x04000000 | 0x08000000 | 0x10000000 | \
    0x20000000 | 0x40000000 | 0x00000080  # NEWNS CGROUP UTS IPC USER PID NET TIME


def _seccomp_program(machine: str, unix_sockets: bool) -> list[tuple[int, int, int, int]]:
    arch, deny, nr_socket, nr_clone, nr_clone3 = SECCOMP[machine]
    ld, jeq, jset, ret = 0x20, 0x15, 0x45, 0x06  # BPF_LD|W|ABS, JMP|JEQ|K, JMP|JSET|K, RET|K
    allow, kill = 0x7FFF0000, 0x80000000  # SECCOMP_RET_ALLOW, SECCOMP_RET_KILL_PROCESS

    def err(n: int) -> int:
        return 0x00050000 | n  # SECCOMP_RET_ERRNO

    prog = [(ld, 0, 0, 4), (jeq, 1, 0, arch), (ret, 0, 0, kill), (ld, 0, 0, 0)]
    if machine == "x86_64":  # the x32 ABI: system call numbers with bit 30 set
        prog += [(0x35, 0, 1, 0x40000000), (ret, 0, 0, err(38))]  # JGE -> ENOSYS
    for nr in sorted(set(deny.values())):
        prog += [(jeq, 0, 1, nr), (ret, 0, 0, err(1))]  # EPERM
    # clone3 takes its flags in memory a filter cannot read: ENOSYS, so libc falls back
    # to clone, whose flags it can
    prog += [(jeq, 0, 1, nr_clone3), (ret, 0, 0, err(38))]
    prog += [(jeq, 0, 3, nr_clone), (ld, 0, 0, 16), (jset, 0, 1, _CLONE_NEW_ANY),
             (ret, 0, 0, err(1))]
    prog += [(ld, 0, 0, 0)]
    if unix_sockets:  # not a socket: on to the allow; AF_UNIX: allow; any other: refused
        prog += [(jeq, 0, 3, nr_socket), (ld, 0, 0, 16), (jeq, 1, 0, 1),  # AF_UNIX
                 (ret, 0, 0, err(97))]  # EAFNOSUPPORT
    else:
        prog += [(jeq, 0, 1, nr_socket), (ret, 0, 0, err(97))]
    prog += [(ret, 0, 0, allow)]
    return prog


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def _seccomp_install(unix_sockets: bool) -> None:
    prog = _seccomp_program(os.uname().machine, unix_sockets)
    raw = b"".join(struct.pack("=HBBI", *ins) for ins in prog)
    buf = ctypes.create_string_buffer(raw, len(raw))
    fprog = _SockFprog(len(prog), ctypes.cast(buf, ctypes.c_void_p))
    libc = _libc()
    if libc.prctl(38, 1, 0, 0, 0) != 0:  # PR_SET_NO_NEW_PRIVS
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS)")
    if libc.prctl(22, 2, ctypes.byref(fprog), 0, 0) != 0:  # PR_SET_SECCOMP, MODE_FILTER
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_SECCOMP)")


# the spec as arguments, one per rule: KIND:VALUE (JSON would cost the import of `re`
# in every worker start)
_SPEC_LISTS = {"r": "read", "f": "read_files", "w": "write_files", "d": "devices", "s": "write"}


def encode_spec(spec: dict) -> list[str]:
    """Arguments for the launcher: landlock ABI, seccomp, unix sockets, then the paths."""
    out = [f"L:{int(spec['landlock'])}", f"S:{int(spec['seccomp'])}",
           f"U:{int(spec['unix_sockets'])}"]
    for k, name in _SPEC_LISTS.items():
        out += [f"{k}:{p}" for p in spec[name]]
    return out


def decode_spec(args: list[str]) -> dict:
    spec: dict = {name: [] for name in _SPEC_LISTS.values()}
    for a in args:
        k, _, v = a.partition(":")
        if k in _SPEC_LISTS:
            spec[_SPEC_LISTS[k]].append(v)
        elif k == "L":
            spec["landlock"] = int(v)
        elif k == "S":
            spec["seccomp"] = v == "1"
        elif k == "U":
            spec["unix_sockets"] = v == "1"
        else:
            raise ValueError(f"unknown launcher argument {a!r}")
    return spec


def _launch(args: list[str]) -> int:
    """The stock launcher (inside the namespaces): Landlock, seccomp, then exec."""
    sep = args.index("--") if "--" in args else len(args)
    argv = args[sep + 1:]
    if not argv:
        sys.stderr.write("kernelcrew sandbox: no command to run\n")
        return 127
    notify = next((int(a[2:]) for a in args[:sep] if a.startswith("N:")), None)
    if os.getpid() == 1:
        # The first process of a PID namespace ignores the signals its own namespace
        # sends it when it has no handler for them, its own SIGSTOP included: the command
        # runs as its child, so a worker can stop itself between calls (see
        # tools/judge/procs.py). This process only waits, unconfined but unreachable:
        # signals from inside the namespace do not reach it, ptrace is filtered. It tells
        # the harness, through `notify`, each time the command has stopped (the kernel's
        # report of a whole group stop): the harness needs no polling to see it.
        pid = os.fork()
        if pid:
            return _reap(pid, notify)
    if notify is not None:
        os.close(notify)  # the command never holds the harness's notification pipe
    try:
        spec = decode_spec([a for a in args[:sep] if not a.startswith("N:")])
        if spec["landlock"]:
            _landlock_restrict(spec)
        if spec["seccomp"]:
            _seccomp_install(spec["unix_sockets"])
    except (OSError, ValueError, KeyError) as e:  # fail closed: nothing runs less confined
        sys.stderr.write(f"kernelcrew sandbox: could not confine: {e}\n")
        return 125
    try:
        os.execvp(argv[0], argv)
    except OSError as e:
        sys.stderr.write(f"kernelcrew sandbox: cannot run {argv[0]}: {e}\n")
        return 127


def _reap(main: int, notify: int | None = None) -> int:
    """As the namespace's first process: reap every child until `main` ends, then exit as
    it did (a death by signal N as 128 + N: this process cannot raise it on itself); each
    time `main` has stopped, one byte to `notify`."""
    while True:
        try:
            pid, status = os.waitpid(-1, os.WUNTRACED if notify is not None else 0)
        except ChildProcessError:
            return 1
        except InterruptedError:
            continue
        if os.WIFSTOPPED(status):
            if pid == main and notify is not None:
                try:
                    os.write(notify, b"s")
                except OSError:
                    notify = None  # the harness went away: only reap from now on
            continue
        if pid == main:
            if os.WIFSIGNALED(status):
                return 128 + os.WTERMSIG(status)
            return os.waitstatus_to_exitcode(status)


SECCOMP_MACHINES = frozenset(SECCOMP)


# -- the guard a CPU worker puts on itself before it loads a kernel ----------------------
# A CPU kernel runs inside the worker's process. Before the worker loads it, the worker
# adds this filter to the launcher's: no new processes (fork, vfork, clone without
# CLONE_THREAD: threads stay allowed, OpenMP needs them; clone3 answers ENOSYS), no exec,
# no signal handlers set (rt_sigaction with a new action: no code run on a fault, a timer
# or a SIGCONT; reading one is allowed), no timers that deliver
# signals, no signals to other processes, no ptrace or reading and writing other
# processes' memory. (Moving its own threads between CPUs stays allowed: LLVM's OpenMP
# runtime sets their affinity when it starts, and it takes nothing from the parent,
# whose thread runs at a higher real-time priority.) Refused calls
# fail with EPERM. Every thread the kernel runs is then a thread of the worker, which the
# parent stops, sees and times; and the guard holds where the launcher's layers could
# not be applied (limits only), since the worker applies it to itself.
_GUARD_DENY = ("fork", "vfork", "execve", "execveat", "setitimer", "alarm",
               "timer_create", "ptrace", "process_vm_readv", "process_vm_writev", "tkill")
# per machine: (audit arch, denied calls, clone, clone3, kill, tgkill, rt_sigaction)
GUARD = {
    "x86_64": (0xC000003E, dict(zip(_GUARD_DENY, (57, 58, 59, 322, 38, 37, 222, 101, 310,
                                                   311, 200), strict=True)),
               56, 435, 62, 234, 13),
    "aarch64": (0xC00000B7, {"execve": 221, "execveat": 281, "setitimer": 103,
                             "timer_create": 107, "ptrace": 117, "process_vm_readv": 270,
                             "process_vm_writev": 271, "tkill": 130},
                220, 435, 129, 131, 134),
}
_CLONE_THREAD = 0x00010000


def guard_program(machine: str, pid: int) -> list[tuple[int, int, int, int]]:
    """The guard's BPF program for this machine; `pid`: the process it guards (kill and
    tgkill may name only it: no signal reaches another process, the parent included,
    even where no PID namespace hides it)."""
    arch, deny, nr_clone, nr_clone3, nr_kill, nr_tgkill, nr_sigaction = GUARD[machine]
    ld, jeq, jset, ret = 0x20, 0x15, 0x45, 0x06
    allow, kill, eperm, enosys = 0x7FFF0000, 0x80000000, 0x00050000 | 1, 0x00050000 | 38
    prog = [(ld, 0, 0, 4), (jeq, 1, 0, arch), (ret, 0, 0, kill), (ld, 0, 0, 0)]
    if machine == "x86_64":  # the x32 ABI's numbers (bit 30) would pass the list below
        prog += [(0x35, 0, 1, 0x40000000), (ret, 0, 0, kill)]
    for nr in sorted(set(deny.values())):
        prog += [(jeq, 0, 1, nr), (ret, 0, 0, eperm)]
    # clone3 takes its flags in memory a filter cannot read: ENOSYS, so libc falls back to
    # clone, whose flags it can (under the stock confinement the launcher's filter does the
    # same; under bubblewrap or limits only this is the one that does)
    prog += [(jeq, 0, 1, nr_clone3), (ret, 0, 0, enosys)]
    # rt_sigaction: reading a handler (argument 1, the new action, NULL) is allowed (LLVM's
    # OpenMP runtime reads them all when it starts); setting one is not
    prog += [(jeq, 0, 6, nr_sigaction), (ld, 0, 0, 24), (jeq, 0, 3, 0), (ld, 0, 0, 28),
             (jeq, 0, 1, 0), (ret, 0, 0, allow), (ret, 0, 0, eperm), (ld, 0, 0, 0)]
    for nr in (nr_kill, nr_tgkill):  # argument 0, the target, must be this process
        prog += [(jeq, 0, 4, nr), (ld, 0, 0, 16), (jeq, 0, 1, pid), (ret, 0, 0, allow),
                 (ret, 0, 0, eperm)]
    # clone: a thread (CLONE_THREAD set in the flags, argument 0) is allowed, a process not
    prog += [(jeq, 0, 3, nr_clone), (ld, 0, 0, 16), (jset, 1, 0, _CLONE_THREAD),
             (ret, 0, 0, eperm)]
    prog += [(ret, 0, 0, allow)]
    return prog


def install_guard() -> None:
    """Put the guard on this process (and every thread it starts from now on); raises
    OSError where seccomp is refused, ValueError on an unknown machine."""
    machine = os.uname().machine
    if machine not in GUARD:
        raise ValueError(f"no worker guard for {machine}")
    prog = guard_program(machine, os.getpid())
    raw = b"".join(struct.pack("=HBBI", *ins) for ins in prog)
    buf = ctypes.create_string_buffer(raw, len(raw))
    fprog = _SockFprog(len(prog), ctypes.cast(buf, ctypes.c_void_p))
    libc = _libc()
    if libc.prctl(38, 1, 0, 0, 0) != 0:  # PR_SET_NO_NEW_PRIVS
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS)")
    # SECCOMP_SET_MODE_FILTER with TSYNC: every thread of the process gets it
    r = libc.syscall(ctypes.c_long(317 if machine == "x86_64" else 277), ctypes.c_long(1),
                     ctypes.c_long(1), ctypes.byref(fprog))
    if r != 0:
        raise OSError(ctypes.get_errno(), "seccomp(SECCOMP_SET_MODE_FILTER, TSYNC)")


if __name__ == "__main__":
    sys.exit(_launch(sys.argv[1:]))
