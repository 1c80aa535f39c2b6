"""Buffer helpers every runtime shares: NaN-poisoning outputs, digesting contents."""

from __future__ import annotations

import hashlib
from typing import Any

import numpy as np


def poison(a: np.ndarray) -> None:
    """Fill an output with values no honest kernel leaves there (NaN, the int minimum, or
    the maximum of an unsigned type, whose minimum is 0)."""
    if a.dtype.kind == "f":
        a.fill(np.nan)
    else:
        a.fill(poison_int(a.dtype))


def poison_int(dtype: np.dtype) -> int:
    info = np.iinfo(dtype)
    return int(info.max if info.min == 0 else info.min)


def checksum(a: Any) -> str:
    """A 128-bit BLAKE2b digest of an array's bytes (NumPy or CuPy on the host side)."""
    return hashlib.blake2b(np.ascontiguousarray(a).view(np.uint8).data, digest_size=16).hexdigest()
