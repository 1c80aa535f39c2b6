"""Buffers the parent owns and a worker only borrows: sealed memory files (memfd).

A kernel's inputs and outputs live in memory the parent created and mapped first; the
worker gets a file descriptor and maps it too. What a verdict reads (the outputs of a
call, the inputs a reference was computed from) the parent reads from its own mapping,
never from a file or message of the worker's.

Seals make the sharing safe against the process that borrows the memory:
- every buffer: its size is fixed (F_SEAL_SHRINK | F_SEAL_GROW), so a worker cannot cut the
  file under the parent's mapping (a read past the end would kill the parent with SIGBUS);
- inputs: F_SEAL_FUTURE_WRITE once the parent's own writable mapping exists, so the worker
  can only map them read-only (a write mapping, an mprotect to writable, write(2), a
  reopen through /proc for writing and fallocate all fail) while the parent can still
  change elements for a run (see `Harness.fresh_changes`);
- F_SEAL_SEAL last, so no seal is added or removed afterwards.

Linux 5.1 or later (F_SEAL_FUTURE_WRITE). Without memfd sealing nothing here works and
the judge refuses to run a kernel (see `available`).
"""

from __future__ import annotations

import fcntl
import functools
import mmap
import os
from dataclasses import dataclass

import numpy as np

F_SEAL_FUTURE_WRITE = 0x0010  # Linux 5.1; Python's fcntl module may not name it
ALIGN = 4096  # every array starts on a page: what a fresh large allocation gets


@functools.cache
def available() -> str:
    """"" when sealed memory files work here, else why not (one line)."""
    try:
        b = SharedBuffer("kernelcrew-probe", ALIGN, readonly_for_worker=True)
        b.close()
    except (OSError, AttributeError) as e:
        return f"sealed memory files (memfd_create, F_SEAL_FUTURE_WRITE) are not available: {e}"
    return ""


@dataclass(frozen=True)
class Slot:
    """One array inside a buffer."""

    offset: int
    dtype: str
    shape: tuple[int, ...]

    @property
    def nbytes(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64)) * np.dtype(self.dtype).itemsize

    def to_json(self) -> list:
        return [self.offset, self.dtype, list(self.shape)]

    @staticmethod
    def from_json(v: list) -> Slot:
        return Slot(int(v[0]), str(v[1]), tuple(int(d) for d in v[2]))


class Layout:
    """Arrays packed one after another, each on its own page."""

    def __init__(self) -> None:
        self.slots: dict[str, Slot] = {}
        self.size = 0

    def add(self, key: str, dtype: str, shape: tuple[int, ...]) -> Slot:
        s = Slot(self.size, dtype, tuple(int(d) for d in shape))
        self.slots[key] = s
        self.size += -(-max(s.nbytes, 1) // ALIGN) * ALIGN
        return s


class SharedBuffer:
    """A sealed memory file, mapped read-write in this (the parent's) process.

    `readonly_for_worker`: sealed against any later write mapping, so the worker's only
    access is read-only (inputs); otherwise the worker may map it writable (outputs)."""

    def __init__(self, name: str, size: int, *, readonly_for_worker: bool) -> None:
        size = max(int(size), ALIGN)
        self.size = size
        self.readonly_for_worker = readonly_for_worker
        self.fd = os.memfd_create(name, os.MFD_ALLOW_SEALING | os.MFD_CLOEXEC)
        try:
            os.ftruncate(self.fd, size)
            self.mm = mmap.mmap(self.fd, size, flags=mmap.MAP_SHARED,
                                prot=mmap.PROT_READ | mmap.PROT_WRITE)
            seals = fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW
            if readonly_for_worker:
                seals |= F_SEAL_FUTURE_WRITE
            fcntl.fcntl(self.fd, fcntl.F_ADD_SEALS, seals | fcntl.F_SEAL_SEAL)
        except BaseException:
            os.close(self.fd)
            raise
        self._closed = False

    def array(self, slot: Slot) -> np.ndarray:
        """The parent's writable view of one array."""
        n = int(np.prod(slot.shape, dtype=np.int64))
        return np.frombuffer(self.mm, dtype=slot.dtype, count=n,
                             offset=slot.offset).reshape(slot.shape)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            self.mm.close()
        except BufferError:
            pass  # a view is still alive somewhere: the mapping goes with the process
        os.close(self.fd)


def map_for_worker(fd: int, size: int, *, writable: bool) -> mmap.mmap:
    """The worker's mapping of a buffer the parent passed (read-only for inputs)."""
    prot = mmap.PROT_READ | (mmap.PROT_WRITE if writable else 0)
    return mmap.mmap(fd, size, flags=mmap.MAP_SHARED, prot=prot)


def view(mm: mmap.mmap, slot: Slot) -> np.ndarray:
    n = int(np.prod(slot.shape, dtype=np.int64))
    return np.frombuffer(mm, dtype=slot.dtype, count=n, offset=slot.offset).reshape(slot.shape)
