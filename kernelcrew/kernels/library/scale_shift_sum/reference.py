"""Reference for scale_shift_sum: out[r] = sum_c (a * x[r, c] + b), in float64."""

import numpy as np


def reference(**kw) -> dict[str, np.ndarray]:
    x = np.asarray(kw["x"], dtype=np.float64)
    a = float(kw["a"])
    b = float(kw["b"])
    return {"out": (a * x + b).sum(axis=1)}
