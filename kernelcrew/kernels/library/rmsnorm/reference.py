"""Reference for rmsnorm: y = x / sqrt(mean(x^2) + eps) * w over each row, in float64."""

import numpy as np


def reference(**kw) -> dict[str, np.ndarray]:
    x = np.asarray(kw["x"], dtype=np.float64)
    w = np.asarray(kw["w"], dtype=np.float64)
    eps = float(kw["eps"])
    ms = np.mean(x * x, axis=1, keepdims=True)
    return {"y": x / np.sqrt(ms + eps) * w}
