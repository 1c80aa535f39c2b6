"""Reference for matvec_t: y = A.T @ x, in float64."""

import numpy as np


def reference(**kw) -> dict[str, np.ndarray]:
    return {"y": np.asarray(kw["a"], dtype=np.float64).T @ np.asarray(kw["x"], dtype=np.float64)}
