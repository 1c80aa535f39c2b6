"""Reference for layernorm: normalize every [b, t, :] row, keep its mean and 1/std, in float64."""

import numpy as np


def reference(**kw) -> dict[str, np.ndarray]:
    x = np.asarray(kw["inp"], dtype=np.float64)
    w = np.asarray(kw["weight"], dtype=np.float64)
    b = np.asarray(kw["bias"], dtype=np.float64)
    m = x.mean(axis=-1)
    v = ((x - m[..., None]) ** 2).mean(axis=-1)
    rs = 1.0 / np.sqrt(v + 1e-5)
    return {"out": (x - m[..., None]) * rs[..., None] * w + b, "mean": m, "rstd": rs}
