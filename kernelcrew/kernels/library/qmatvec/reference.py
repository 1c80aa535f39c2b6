"""Reference for qmatvec: the exact integer dot products, scaled, in float64."""

import numpy as np


def reference(**kw) -> dict[str, np.ndarray]:
    W = np.asarray(kw["W"], dtype=np.int64)
    x = np.asarray(kw["x"], dtype=np.int64)
    scale = np.asarray(kw["scale"], dtype=np.float64)
    return {"y": scale * (W @ x).astype(np.float64)}
