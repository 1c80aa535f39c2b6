"""Buffer helpers every runtime shares: NaN-poisoning outputs, digesting contents."""

from __future__ import annotations

import hashlib
from typing import Any

import numpy as np


def poison(a: np.ndarray) -> None:
    """Fill an output with values no honest kernel leaves there (NaN, or the int minimum)."""
    if a.dtype.kind == "f":
        a.fill(np.nan)
    else:
        a.fill(np.iinfo(a.dtype).min)


def checksum(a: Any) -> str:
    """A 128-bit BLAKE2b digest of an array's bytes (NumPy or CuPy on the host side)."""
    return hashlib.blake2b(np.ascontiguousarray(a).view(np.uint8).data, digest_size=16).hexdigest()
