"""A derived reference: a float64 C++ build of an operator's own code (written by
`kernelcrew import`), compiled once with g++ and called through ctypes.

The reference is the user's own code, run in the parent like any `reference.py`: it is
compiled without fast-math or FMA contraction and without OpenMP (pragmas are ignored),
so it is serial and deterministic. The shared library is cached by the source's digest.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import shutil
import subprocess
import threading
from pathlib import Path
from typing import Any

import numpy as np
import platformdirs

from kernelcrew.errors import InputError
from kernelcrew.kernels.expr import evaluate

FLAGS = ["-O2", "-std=c++17", "-shared", "-fPIC", "-ffp-contract=off", "-fno-fast-math", "-w"]
_NP = {"float32": np.float64, "float16": np.float64, "float64": np.float64,
       "int32": np.int32, "int64": np.int64, "uint8": np.uint8, "int8": np.int8,
       "uint16": np.uint16, "int16": np.int16, "uint32": np.uint32}
_LOCK = threading.Lock()


def _cache_root() -> Path:
    root = os.environ.get("KERNELCREW_CACHE_DIR") or platformdirs.user_cache_dir("kernelcrew")
    return Path(root) / "derived"


class DerivedReference:
    """`reference(**kw)` for an op whose reference64.cpp holds the float64 entry."""

    def __init__(self, source: Path, *, entry: str,
                 args: list[tuple[str, str, str, list[str]]], openmp: bool = False) -> None:
        self.source = Path(source)
        self.entry = entry
        self.args = args  # (name, kind, dtype, shape) in the entry's order
        self.openmp = openmp
        self._fn: Any = None

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

    def _function(self) -> Any:
        with _LOCK:
            if self._fn is None:
                lib = ctypes.CDLL(str(self.library()))
                fn = getattr(lib, self.entry)
                types: list[Any] = []
                for _name, kind, dtype, _shape in self.args:
                    if kind in ("input", "output"):
                        types.append(ctypes.c_void_p)
                    elif kind == "scalar":
                        types.append(ctypes.c_double)
                    else:
                        types.append(ctypes.c_int64)
                fn.argtypes = types
                fn.restype = None
                self._fn = fn
        return self._fn

    def __call__(self, **kw: Any) -> dict[str, np.ndarray]:
        fn = self._function()
        sizes = {n: int(kw[n]) for n, k, _d, _s in self.args if k == "size"}
        call: list[Any] = []
        keep: list[np.ndarray] = []
        outs: dict[str, np.ndarray] = {}
        for name, kind, dtype, shape in self.args:
            if kind == "input":
                a = np.ascontiguousarray(kw[name], dtype=_NP[dtype])
                keep.append(a)
                call.append(a.ctypes.data)
            elif kind == "output":
                dims = tuple(evaluate(d, sizes) for d in shape)
                a = (np.full(dims, np.nan, dtype=np.float64) if _NP[dtype] is np.float64
                     else np.zeros(dims, dtype=_NP[dtype]))
                outs[name] = a
                call.append(a.ctypes.data)
            elif kind == "scalar":
                call.append(float(kw[name]))
            else:
                call.append(sizes[name])
        fn(*call)
        return outs
