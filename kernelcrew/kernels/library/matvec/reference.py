"""Reference for matvec: y = A @ x, in float64."""

import numpy as np


def reference(**kw) -> dict[str, np.ndarray]:
    return {"y": np.asarray(kw["A"], dtype=np.float64) @ np.asarray(kw["x"], dtype=np.float64)}
