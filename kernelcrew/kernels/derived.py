"""A derived reference: a float64 C++ build of an operator's own code (written by
`kernelcrew import`), compiled once with g++ and called through ctypes.

The reference is the user's own code: it is compiled without fast-math or FMA contraction
and without OpenMP (pragmas are ignored), so it is serial and deterministic, and cached by
the source's digest. It runs in a child process, one per reference, started on the first
call: code that aborts, faults or hangs on a case (a mode the function does not handle, an
`abort()` on an input it rejects) costs that call a one-line error naming the case, never
the kernelcrew process that asked.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import pickle
import select
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import threading
import weakref
from pathlib import Path
from typing import IO, Any

import numpy as np
import platformdirs

from kernelcrew.errors import InputError
from kernelcrew.kernels.expr import evaluate

FLAGS = ["-O2", "-std=c++17", "-shared", "-fPIC", "-ffp-contract=off", "-fno-fast-math", "-w"]
_NP = {"float32": np.float64, "float16": np.float64, "float64": np.float64,
       "int32": np.int32, "int64": np.int64, "uint8": np.uint8, "int8": np.int8,
       "uint16": np.uint16, "int16": np.int16, "uint32": np.uint32}


def _cache_root() -> Path:
    root = os.environ.get("KERNELCREW_CACHE_DIR") or platformdirs.user_cache_dir("kernelcrew")
    return Path(root) / "derived"


class ReferenceDied(InputError):
    """The float64 build of the function died, hung or exited on a case."""

    def __init__(self, message: str, *, path: str | Path | None = None,
                 what: str = "") -> None:
        super().__init__(message, path=path)
        self.what = what  # "died of SIGSEGV", "ran past 600 s", "exited with code 1"


class DerivedReference:
    """`reference(**kw)` for an op whose reference64.cpp holds the float64 entry."""

    def __init__(self, source: Path, *, entry: str,
                 args: list[tuple[str, str, str, list[str]]], openmp: bool = False) -> None:
        self.source = Path(source)
        self.entry = entry
        self.args = args  # (name, kind, dtype, shape) in the entry's order
        self.openmp = openmp
        self._lock = threading.Lock()
        self._worker: subprocess.Popen | None = None

    def library(self) -> Path:
        if not self.source.is_file():
            raise InputError("the derived reference's source is missing; run `kernelcrew "
                             "import` again or write reference.py by hand", path=self.source)
        text = self.source.read_bytes()
        flags = FLAGS + (["-fopenmp"] if self.openmp else [])
        cxx = os.environ.get("CXX") or shutil.which("g++") or "g++"
        key = hashlib.sha256(text + " ".join([cxx, *flags]).encode()).hexdigest()[:20]
        lib = _cache_root() / f"{key}.so"
        if lib.exists():
            return lib
        lib.parent.mkdir(parents=True, exist_ok=True)
        tmp = lib.with_suffix(f".{os.getpid()}.{threading.get_ident()}.tmp")
        r = subprocess.run([cxx, *flags, str(self.source), "-o", str(tmp)],
                           capture_output=True, text=True, timeout=300, check=False)
        if r.returncode != 0:
            first = next((ln for ln in r.stderr.splitlines() if "error" in ln), r.stderr[:200])
            raise InputError(f"the derived float64 reference does not compile: {first.strip()}",
                             path=self.source)
        os.replace(tmp, lib)
        return lib

    def __call__(self, **kw: Any) -> dict[str, np.ndarray]:
        lib = self.library()
        sizes = {n: int(kw[n]) for n, k, _d, _s in self.args if k == "size"}
        values: dict[str, Any] = {}
        for name, kind, dtype, _shape in self.args:
            if kind == "input":
                values[name] = np.ascontiguousarray(kw[name], dtype=_NP[dtype])
            elif kind == "scalar":
                values[name] = float(kw[name])
        with self._lock:
            if self._worker is None or self._worker.poll() is not None:
                self._worker = _start_worker(lib, self.entry, self.args)
                weakref.finalize(self, _stop, self._worker)
            w = self._worker
            try:
                _send(w.stdin, (values, sizes))
                reply = _receive(w.stdout, CALL_TIMEOUT_S)
            except (OSError, EOFError, TimeoutError) as exc:
                self._worker = None
                raise self._died(w, exc, sizes) from None
        return reply

    def _died(self, w: subprocess.Popen, exc: BaseException, sizes: dict[str, int]
              ) -> ReferenceDied:
        hung = isinstance(exc, TimeoutError)
        if hung:
            w.kill()
        try:
            code = w.wait(timeout=10)
        except subprocess.TimeoutExpired:
            w.kill()
            code = w.wait()
        log = getattr(w, "log", None)
        if log is not None:
            log.seek(0)
        err = (log.read() if log is not None else b"").decode(errors="replace")
        last = next((ln for ln in reversed(err.splitlines()) if ln.strip()), "")
        case = ",".join(f"{k}={v}" for k, v in sizes.items()) or "its one case"
        if hung:
            what = f"ran past {CALL_TIMEOUT_S:.0f} s"
        elif code < 0:
            what = f"died of {signal.Signals(-code).name}"
        else:
            what = f"exited with code {code}"
        ints = [n for n, k, d, _s in self.args if k == "input" and not d.startswith("float")]
        values = (f"; where {', '.join(ints)} {'holds' if len(ints) == 1 else 'hold'} "
                  "indices or counts, the values drawn may be "
                  f"what it rejects: give their range at import (--values {ints[0]}=LO:HI)"
                  if ints else "")
        return ReferenceDied(
            f"the float64 reference (the function's own code) {what} on {case}"
            + (f" ({last.strip()[:160]})" if last and not hung else "")
            + ": the case is outside what the function handles; drop it from op.yaml's "
            "shapes (or give --case values the code accepts), or write reference.py by hand"
            + values, path=self.source, what=what)


# ---------------------------------------------------------------- the child process

CALL_TIMEOUT_S = 600.0
_HEADER = struct.Struct("<Q")


def _send(f: IO[bytes], obj: Any) -> None:
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    f.write(_HEADER.pack(len(data)) + data)
    f.flush()


def _read_exact(f: IO[bytes], n: int) -> bytes:
    chunks, got = [], 0
    while got < n:
        b = f.read(n - got)
        if not b:
            raise EOFError("the reference process closed its pipe")
        chunks.append(b)
        got += len(b)
    return b"".join(chunks)


def _receive(f: IO[bytes], timeout: float | None = None) -> Any:
    if timeout is not None and not select.select([f], [], [], timeout)[0]:
        raise TimeoutError
    (n,) = _HEADER.unpack(_read_exact(f, _HEADER.size))
    return pickle.loads(_read_exact(f, n))


def _start_worker(lib: Path, entry: str, args: list) -> subprocess.Popen:
    # its stderr in a file: a pipe nobody reads while it runs would stop a chatty library
    log = tempfile.TemporaryFile()  # noqa: SIM115 (closed by _stop, with the worker)
    w = subprocess.Popen(
        [sys.executable, "-c", "from kernelcrew.kernels.derived import _serve; _serve()"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log, start_new_session=True)
    w.log = log  # type: ignore[attr-defined]
    assert w.stdin is not None
    _send(w.stdin, (str(lib), entry, args))
    return w


def _stop(w: subprocess.Popen) -> None:
    """Close the child's input: it exits at the end of its loop."""
    for f in (w.stdin, w.stdout, getattr(w, "log", None)):
        try:
            if f is not None:
                f.close()
        except OSError:
            pass
    try:
        w.wait(timeout=5)
    except subprocess.TimeoutExpired:
        w.kill()
        w.wait()


def _serve() -> None:
    """The child: load the library, then answer calls until the parent closes the pipe."""
    # the replies on a descriptor of their own: what the library prints (printf writes to
    # descriptor 1) goes to stderr, never into a reply
    sys.stdout.flush()
    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    inp = sys.stdin.buffer
    lib, entry, args = _receive(inp)
    fn = getattr(ctypes.CDLL(lib), entry)
    fn.argtypes = [ctypes.c_void_p if kind in ("input", "output") else
                   ctypes.c_double if kind == "scalar" else ctypes.c_int64
                   for _n, kind, _d, _s in args]
    fn.restype = None
    while True:
        try:
            values, sizes = _receive(inp)
        except EOFError:
            return
        call: list[Any] = []
        outs: dict[str, np.ndarray] = {}
        for name, kind, dtype, shape in args:
            if kind == "input":
                call.append(values[name].ctypes.data)
            elif kind == "output":
                dims = tuple(evaluate(d, sizes) for d in shape)
                a = (np.full(dims, np.nan, dtype=np.float64) if _NP[dtype] is np.float64
                     else np.zeros(dims, dtype=_NP[dtype]))
                outs[name] = a
                call.append(a.ctypes.data)
            elif kind == "scalar":
                call.append(values[name])
            else:
                call.append(sizes[name])
        fn(*call)
        _send(out, outs)
