"""Reference for conv1d_causal: out[b, c, t] = bias[c] + sum_k w[c, k] * x[b, c, t - (K-1) + k]
with zeros before t = 0, in float64."""

import numpy as np


def reference(**kw) -> dict[str, np.ndarray]:
    x = np.asarray(kw["x"], dtype=np.float64)
    w = np.asarray(kw["w"], dtype=np.float64)
    bias = np.asarray(kw["bias"], dtype=np.float64)
    K, L = w.shape[1], x.shape[2]
    xp = np.concatenate([np.zeros(x.shape[:2] + (K - 1,)), x], axis=2)
    out = np.broadcast_to(bias[None, :, None], x.shape).copy()
    for k in range(K):
        out += w[None, :, k, None] * xp[:, :, k:k + L]
    return {"out": out}
