"""Reference for gemm_nt: c = a @ b.T + bias in float64."""

import numpy as np


def reference(**kw) -> dict[str, np.ndarray]:
    a = np.asarray(kw["a"], dtype=np.float64)
    b = np.asarray(kw["b"], dtype=np.float64)
    return {"c": a @ b.T + np.asarray(kw["bias"], dtype=np.float64)[None, :]}
