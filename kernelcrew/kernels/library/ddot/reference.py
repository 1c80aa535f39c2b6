"""Reference for ddot: the dot product, in float64 (compensated by NumPy's pairwise sum)."""

import math

import numpy as np


def reference(**kw) -> dict[str, np.ndarray]:
    x = np.asarray(kw["x"], dtype=np.float64)
    y = np.asarray(kw["y"], dtype=np.float64)
    return {"r": np.array([math.fsum(x * y)])}
