"""Facts about the CPU kernels run on: the compiler, the threads a kernel may use, the
last-level cache (the CPU backend, the peaks and the peers all read them here)."""

from __future__ import annotations

import functools
import os
from pathlib import Path

CXX = os.environ.get("KERNELCREW_CXX", "g++")


@functools.cache
def cpu_threads() -> int:
    """Threads a kernel may use: the cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1

def llc_bytes() -> int | None:
    """Size of the largest cache of cpu0, from sysfs."""
    best = None
    base = Path("/sys/devices/system/cpu/cpu0/cache")
    for idx in base.glob("index*"):
        try:
            text = (idx / "size").read_text().strip()
        except OSError:
            continue
        mult = {"K": 2**10, "M": 2**20, "G": 2**30}.get(text[-1:].upper(), 1)
        digits = text.rstrip("KkMmGg")
        if digits.isdigit():
            size = int(digits) * mult
            best = max(best or 0, size)
    return best
