"""Reference for gelu_tanh: the tanh approximation of GELU, in float64."""

import numpy as np


def reference(**kw) -> dict[str, np.ndarray]:
    x = np.asarray(kw["x"], dtype=np.float64)
    u = np.sqrt(2.0 / np.pi) * (x + 0.044715 * x**3)
    return {"y": 0.5 * x * (1.0 + np.tanh(u))}
