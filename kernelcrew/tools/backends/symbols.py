"""What a compiled CPU kernel may call: its undefined dynamic symbols against an allow-list.

A CPU kernel's shared library runs inside the worker's process, so whatever it imports it
can call. After g++ builds it, every undefined dynamic symbol (`nm -D --undefined-only`)
must be one a compute kernel needs:
- libm and the vector math library (every function they export, read from this machine's
  libraries, plus the `_ZGV*` vector variants), and libgcc_s's arithmetic helpers;
- the C library's memory functions (memcpy, memset, malloc, free, ... and their
  _FORTIFY_SOURCE `__*_chk` forms), `abort`, `__assert_fail`, `__errno_location`,
  `__stack_chk_fail`, `qsort`, `bsearch`, `abs`;
- the C++ runtime a kernel uses without asking (operator new and delete, exceptions,
  function-local statics, `std::__throw_*`), not its threads, files or clocks;
- OpenMP's runtime (`GOMP_*`, `omp_*`, `__kmpc_*`);
- the weak symbols every shared object carries (`__gmon_start__`, `__cxa_finalize`,
  `_ITM_*TMCloneTable`, `__cxa_atexit`).
Anything else — the Python C API, `syscall`, `dlopen`/`dlsym`, `pthread_*` and
`std::thread`, `fork`/`exec*`, signal and timer calls, `sched_*affinity`, files, sockets,
`mmap`/`mprotect` — refuses the kernel before it runs, with the symbol named. This is
one layer: a kernel that finds a function without importing it still meets the worker's
seccomp guard (no processes, no signal handlers) and a parent that reads nothing the
worker writes (see tools/judge).
"""

from __future__ import annotations

import functools
import re
import shutil
import subprocess
from pathlib import Path

_LIBC = frozenset({
    "memcpy", "memmove", "memset", "memcmp", "malloc", "free", "calloc", "realloc",
    "aligned_alloc", "posix_memalign", "memalign", "abort", "__assert_fail",
    "__errno_location", "__stack_chk_fail", "qsort", "bsearch", "abs", "labs", "llabs",
    "strlen", "__memcpy_chk", "__memmove_chk", "__memset_chk",
    "__gmon_start__", "__cxa_finalize", "__cxa_atexit", "_ITM_registerTMCloneTable",
    "_ITM_deregisterTMCloneTable", "__tls_get_addr",
})
_CXX = re.compile(
    r"^(_Znwm|_Znam|_ZdlPv|_ZdaPv)(m|St11align_val_t|mSt11align_val_t|RKSt9nothrow_t|"
    r"St11align_val_tRKSt9nothrow_t)?$"
    r"|^__cxa_(begin_catch|end_catch|rethrow|allocate_exception|free_exception|throw|"
    r"guard_acquire|guard_release|guard_abort|pure_virtual|get_exception_ptr|"
    r"call_unexpected|bad_array_new_length|throw_bad_array_new_length)$"
    r"|^__gxx_personality_v0$|^_Unwind_(Resume|GetIP|GetRegionStart|GetLanguageSpecificData)$"
    r"|^_ZSt\d+__throw_\w+$|^_ZTISt\w+$|^_ZTVN10__cxxabiv\w+$|^_ZNSt9exception\w*D\dEv$"
    r"|^_ZNKSt9exception4whatEv$|^_ZSt9terminatev$")
_OPENMP = re.compile(r"^(GOMP_\w+|omp_\w+|__kmpc_\w+)$")
_VECTOR_MATH = re.compile(r"^_ZGV\w+$")
# what a refused symbol is, for the message
_KINDS = [
    (re.compile(r"^_?Py|^PyGILState|^_Py"), "the Python C API"),
    (re.compile(r"^(syscall|ioctl|prctl|ptrace)$"), "a raw system call"),
    (re.compile(r"^(dlopen|dlsym|dlvsym|dlmopen|dladdr\w*|dlinfo)$"), "dynamic loading"),
    (re.compile(r"^pthread_|^_ZNSt6thread|^clone|^thrd_|^__pthread"), "thread creation"),
    (re.compile(r"^(fork|vfork|execv\w*|execl\w*|system|popen|posix_spawn\w*|_exit|exit)$"),
     "processes"),
    (re.compile(r"sig|^raise$|^kill$|^alarm$|^setitimer$|^timer_|^pause$"),
     "signals and timers"),
    (re.compile(r"^sched_"), "scheduling and CPU affinity"),
    (re.compile(r"^(mmap|mmap64|munmap|mprotect|madvise|mremap|mlock\w*|brk|sbrk)$"),
     "memory mappings"),
    (re.compile(r"^(f?open\w*|creat\w*|read|write|pread\w*|pwrite\w*|close|unlink\w*|"
                r"remove|rename|fopen\w*|fwrite|fread|fprintf|printf|puts|socket|connect|"
                r"bind|send\w*|recv\w*)$"), "files, sockets or output"),
    (re.compile(r"time|clock|gettimeofday|rdtsc"), "clocks"),
]


class SymbolError(RuntimeError):
    """The symbols of a library could not be read."""


def _nm() -> str | None:
    return shutil.which("nm")


def undefined_symbols(lib: str | Path) -> list[str]:
    """The undefined dynamic symbols of a shared library (versions stripped)."""
    nm = _nm()
    if nm is None:
        raise SymbolError("nm not found (install binutils, which g++ needs anyway)")
    r = subprocess.run([nm, "-D", "--undefined-only", "--format=posix", str(lib)],
                       capture_output=True, text=True, timeout=60, check=False)
    if r.returncode != 0:
        raise SymbolError(f"nm failed on the kernel's library: {r.stderr.strip()[:200]}")
    out = []
    for line in r.stdout.splitlines():
        parts = line.split()
        if parts:
            out.append(parts[0].split("@")[0])
    return out


def _loaded_library(stem: str) -> Path | None:
    """The path of a library this process has loaded (libm: Python links it)."""
    try:
        for line in Path("/proc/self/maps").read_text().splitlines():
            path = line.split()[-1] if line.split() else ""
            if Path(path).name.startswith(stem + "."):
                return Path(path)
    except OSError:
        pass
    return None


@functools.cache
def _exported(stems: tuple[str, ...]) -> frozenset[str]:
    """Every function the named system libraries export (libm, libmvec, libgcc_s)."""
    import ctypes.util

    names: set[str] = set()
    nm = _nm()
    if nm is None:
        return frozenset()
    libm = _loaded_library("libm")
    dirs = [libm.parent] if libm else []
    for stem in stems:
        candidates = [d / f"{stem}.so.{v}" for d in dirs for v in ("6", "1")]
        found = ctypes.util.find_library(stem.removeprefix("lib"))
        if found:
            candidates += [d / found for d in dirs] + [Path(found)]
        for p in candidates:
            if p.exists():
                r = subprocess.run([nm, "-D", "--defined-only", "--format=posix", str(p)],
                                   capture_output=True, text=True, timeout=60, check=False)
                names |= {ln.split()[0].split("@")[0] for ln in r.stdout.splitlines()
                          if ln.split() and ln.split()[1] in ("T", "W", "i", "t")}
                break
    return frozenset(names)


def allowed(name: str) -> bool:
    if name in _LIBC or _CXX.match(name) or _OPENMP.match(name) or _VECTOR_MATH.match(name):
        return True
    return name in _exported(("libm", "libmvec", "libgcc_s"))


def kind_of(name: str) -> str:
    return next((what for rx, what in _KINDS if rx.search(name)), "")


def refused_symbols(lib: str | Path) -> str:
    """Why the library may not run (the symbols it imports that are not allowed), or ""."""
    try:
        names = undefined_symbols(lib)
    except (SymbolError, OSError, subprocess.TimeoutExpired) as e:
        return f"its dynamic symbols could not be checked: {e}"  # fail closed
    bad = sorted({n for n in names if not allowed(n)})
    if not bad:
        return ""
    first = bad[0]
    what = kind_of(first)
    more = f" (and {len(bad) - 1} more: {', '.join(bad[1:4])})" if len(bad) > 1 else ""
    return (f"the kernel imports `{first}`{f' ({what})' if what else ''}{more}: a kernel may "
            "call only the C/C++ runtime's memory and exception functions, libm and OpenMP")
