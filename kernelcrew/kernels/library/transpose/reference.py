"""Reference for transpose: y = x.T (row-major [cols, rows])."""

import numpy as np


def reference(**kw) -> dict[str, np.ndarray]:
    x = np.asarray(kw["x"], dtype=np.float64)
    return {"y": np.ascontiguousarray(x.T)}
